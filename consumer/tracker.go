package consumer

import (
	"context"
	"fmt"
	"time"

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
// The ledger is a RetryAfterLedger: a message whose key another delivery
// holds is InProgress, and Handle's error is also an *idem.InFlightError
// whose RetryAfter is the rest of that delivery's reservation, which lapses
// a TTL after it was taken (see ErrInProgress). That is when the key is
// free at the latest: the holder usually settles it sooner, and a TTL
// chosen well above the slowest handler makes it a long wait, so a broker
// loop may want to delay the redelivery by less.
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

func (l *trackerLedger) Claim(ctx context.Context, key string) (Claim, State, error) {
	c, state, _, err := l.ClaimRetryAfter(ctx, key)
	return c, state, err
}

// ClaimRetryAfter returns, with Busy, the rest of the holder's
// reservation; 0 if the key was settled or lapsed since Acquire found it
// taken, and is no longer Completed either (a release: the redelivery may
// run at once).
func (l *trackerLedger) ClaimRetryAfter(_ context.Context, key string) (Claim, State, time.Duration, error) {
	if l.err != nil {
		return nil, 0, 0, l.err
	}
	tok, ok := l.t.Acquire(l.scope, key)
	if ok {
		return &trackerClaim{l: l, key: key, tok: tok}, Claimed, 0, nil
	}
	if rest, reserved := l.t.Reserved(l.scope, key); reserved {
		return nil, Busy, rest, nil
	}
	if l.t.Completed(l.scope, key) {
		return nil, Done, 0, nil
	}
	return nil, Busy, 0, nil
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
		// it. (A lapsed claim, swept or not, or a stopped tracker,
		// leaves the key free: released as asked.)
		return errClaimLost
	}
	return nil
}

// errClaimLost is what a trackerClaim's Complete and Release return when
// its reservation is no longer its own.
var errClaimLost = fmt.Errorf("consumer: the claim on the key was lost "+
	"(it outlived the tracker's TTL and another delivery took the key, or the tracker was stopped): %w",
	idem.ErrStaleToken)
