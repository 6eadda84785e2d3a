// Package leftcalls counts the work a store goes on with for callers that
// have left (their context ended first): a command still on the wire
// whose answer may reserve a key, and the release of such a reservation.
// A store's Drain waits for the count to return to 0 before its client is
// closed, so that closing cuts none of that work off.
package leftcalls

import (
	"context"
	"sync"
	"sync/atomic"
)

// Counter counts such work; the zero Counter counts none. Counting is an
// atomic add: the lock is taken, at the count's return to 0, only while
// an Idle waits.
type Counter struct {
	n       atomic.Int64
	waiting atomic.Int32 // Idles waiting
	mu      sync.Mutex
	// wake is made by the first Idle to wait and closed, and forgotten,
	// at the count's next return to 0: one channel, however many Idles
	// wait or give up meanwhile.
	wake chan struct{}
}

// Add counts one more piece of work.
func (c *Counter) Add() { c.n.Add(1) }

// Done counts one piece of work as ended.
func (c *Counter) Done() {
	if c.n.Add(-1) == 0 && c.waiting.Load() > 0 {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.wake != nil {
			close(c.wake)
			c.wake = nil
		}
	}
}

// Idle returns nil once nothing is counted, or ctx's error if ctx ends
// first.
func (c *Counter) Idle(ctx context.Context) error {
	if c.n.Load() == 0 {
		return nil
	}
	c.waiting.Add(1)
	defer c.waiting.Add(-1)
	c.mu.Lock()
	if c.wake == nil {
		c.wake = make(chan struct{})
	}
	wake := c.wake
	c.mu.Unlock()
	// Counted after waiting: a Done that brought the count to 0 before
	// it saw an Idle waiting is seen here.
	if c.n.Load() == 0 {
		return nil
	}
	select {
	case <-wake:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
