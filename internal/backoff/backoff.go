// Package backoff paces the repeats of a call that failed for a reason
// that passes (a connection dropped, a server restarting): the settle
// calls of the idempotency core and the durable engine's outcome commits.
package backoff

import (
	"context"
	"time"
)

// The waits before the repeats: First before the first, then twice the
// wait before, at most Longest.
const (
	First   = 10 * time.Millisecond
	Longest = 500 * time.Millisecond
)

// Repeat calls try after First, then again after twice as long each time,
// at most Longest apart, until try reports that it is done or ctx ends,
// and reports whether try was done. try is not called once ctx has
// ended.
func Repeat(ctx context.Context, try func() (done bool)) bool {
	t := time.NewTimer(First)
	defer t.Stop()
	for wait := First; ; {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
		if try() {
			return true
		}
		wait = min(2*wait, Longest)
		t.Reset(wait)
	}
}
