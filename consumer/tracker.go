package consumer

import (
	"context"

	"github.com/idemgo/idem/tracker"
)

// TrackerLedger keeps keys in an in-process tracker under scope: no I/O per
// message, for a single consumer process (or one partition owner). The
// tracker must be started; a tracker that is not started fails open, as the
// tracker documents: every delivery is then Claimed and handled.
//
// A claim holds its key for the tracker's TTL; a handler that runs longer
// than that loses the key to a redelivery, so choose the TTL well above the
// slowest handler. Completed keys are remembered for the TTL after
// completion.
func TrackerLedger(t *tracker.Tracker, scope string) Ledger {
	return &trackerLedger{t: t, scope: scope}
}

type trackerLedger struct {
	t     *tracker.Tracker
	scope string
}

func (l *trackerLedger) Claim(_ context.Context, key string) (Claim, State, error) {
	tok, ok := l.t.Acquire(l.scope, key)
	switch {
	case ok:
		return &trackerClaim{l: l, key: key, tok: tok}, Claimed, nil
	case l.t.Completed(l.scope, key):
		return nil, Done, nil
	default:
		return nil, Busy, nil
	}
}

type trackerClaim struct {
	l   *trackerLedger
	key string
	tok tracker.Token
}

func (c *trackerClaim) Complete(context.Context) error {
	if c.tok.IsZero() { // fail-open: nothing is tracked
		return nil
	}
	c.l.t.CompleteOwned(c.l.scope, c.key, c.tok)
	return nil
}

func (c *trackerClaim) Release(context.Context) error {
	if c.tok.IsZero() {
		return nil
	}
	c.l.t.ReleaseOwned(c.l.scope, c.key, c.tok)
	return nil
}
