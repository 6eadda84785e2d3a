package consumer

import (
	"context"
	"fmt"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/tracker"
)

// TrackerLedger keeps keys in an in-process tracker under scope: no I/O per
// message, for a single consumer process (or one partition owner). The
// tracker must be started; a tracker that is not started fails open, as the
// tracker documents: every delivery is then Claimed and handled.
//
// A claim holds its key for the tracker's TTL; a handler that runs longer
// than that loses the key to a redelivery, so choose the TTL well above the
// slowest handler. A delivery whose key was taken over so leaves it to the
// redelivery, and Handle's error then wraps idem.ErrStaleToken, as
// StoreLedger reports a lost lease: with Handled, the key was not marked
// done. A handler that succeeds after the tracker was stopped is reported
// the same way, since nothing marks its key done. Completed keys are
// remembered for the TTL after completion.
//
// A message whose key another delivery holds is InProgress with
// ErrInProgress alone: the tracker does not tell how long a reservation has
// left, so Handle's error carries no RetryAfter (the holder keeps the key
// for at most the tracker's TTL).
//
// A nil t (as tracker.NewChecked returns with its error) makes a ledger that
// New refuses with a *ConfigError, and whose Claim returns that error: a nil
// Tracker can never be started, so it would let every duplicate through.
func TrackerLedger(t *tracker.Tracker, scope string) Ledger {
	l := &trackerLedger{t: t, scope: scope}
	if t == nil {
		l.err = configErrorf("Config.Ledger", "is a TrackerLedger without a tracker (a nil *tracker.Tracker)")
	}
	return l
}

type trackerLedger struct {
	t     *tracker.Tracker
	scope string
	err   error // a *ConfigError for a nil tracker
}

func (l *trackerLedger) configErr() error { return l.err }

func (l *trackerLedger) Claim(_ context.Context, key string) (Claim, State, error) {
	if l.err != nil {
		return nil, 0, l.err
	}
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
	if !c.l.t.CompleteOwned(c.l.scope, c.key, c.tok) {
		return errClaimLost
	}
	return nil
}

func (c *trackerClaim) Release(context.Context) error {
	if c.tok.IsZero() {
		return nil
	}
	if !c.l.t.ReleaseOwned(c.l.scope, c.key, c.tok) && c.l.t.Seen(c.l.scope, c.key) {
		// Not freed because another delivery holds the key or completed
		// it. (A lapsed claim that the sweeper deleted, or a stopped
		// tracker, leaves the key free: released as asked.)
		return errClaimLost
	}
	return nil
}

// errClaimLost is what a trackerClaim's Complete and Release return when
// its reservation is no longer its own.
var errClaimLost = fmt.Errorf("consumer: the claim on the key was lost "+
	"(it outlived the tracker's TTL and another delivery took the key, or the tracker was stopped): %w",
	idem.ErrStaleToken)
