package consumer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemgo/idem"
)

// Outcome is what Handle did with a message.
type Outcome int

// Outcomes of Handle.
const (
	// Handled: the handler ran and succeeded — acknowledge. Its key is
	// marked done, unless Handle also returned an error: marking it failed,
	// so a redelivery may run the handler again.
	Handled Outcome = iota + 1
	// Duplicate: the key was handled before; the handler did not run.
	Duplicate
	// InProgress: another delivery of the key is being handled right now;
	// the handler did not run. Leave the message for redelivery: after
	// the RetryAfter of Handle's error, when it has one (see
	// ErrInProgress).
	InProgress
	// Failed: the handler failed (no failure is recorded, not even one
	// marked idem.Permanent), or the key, the ledger or ctx did not let it
	// run. Leave the message for redelivery. A key the handler failed on is
	// released, unless Handle's error says releasing it failed (it stays
	// claimed until its lease or TTL runs out) or the claim was lost.
	Failed
)

var outcomeNames = [...]string{"invalid", "handled", "duplicate", "in_progress", "failed"}

func (o Outcome) String() string {
	if o >= 0 && int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Ack reports whether the message should be acknowledged: true for Handled
// and Duplicate.
func (o Outcome) Ack() bool { return o == Handled || o == Duplicate }

// ErrInProgress is the error Handle returns with InProgress: test for it
// with errors.Is. When the ledger knows how long the delivery being handled
// still holds the key (StoreLedger does: the rest of its lease;
// TrackerLedger too: the rest of its reservation), the error is also an
// *idem.InFlightError, whose RetryAfter says so: a broker loop can delay
// the redelivery by it (nack with a delay, or a visibility timeout) rather
// than redeliver at once, only to find the key still held. Otherwise (a
// Ledger that is not a RetryAfterLedger, or one that reports no
// RetryAfter) it is ErrInProgress itself. See the
// package documentation for a broker loop.
var ErrInProgress = errors.New("consumer: a delivery with this key is being handled")

// inProgressError is Handle's error with InProgress when the ledger said how
// long the key stays held: both ErrInProgress and inFlight.
type inProgressError struct {
	inFlight *idem.InFlightError
}

func (e *inProgressError) Error() string {
	return fmt.Sprintf("%v; retry after %v", ErrInProgress, e.inFlight.RetryAfter)
}

func (e *inProgressError) Unwrap() []error { return []error{ErrInProgress, e.inFlight} }

// errNilContext is what Handle returns for a nil ctx.
var errNilContext = fmt.Errorf("%w: consumer: Handle with a nil context", idem.ErrInvalidArgument)

// errEmptyKey is what Handle returns for a message whose Key is empty.
var errEmptyKey = fmt.Errorf("consumer: message key: %w",
	&idem.KeyError{Kind: idem.ErrKeyEmpty, Detail: "the message's key is empty (Config.Key returned \"\")"})

// Config configures a Consumer of messages of type M.
type Config[M any] struct {
	// Ledger records which keys are claimed and done. Required.
	Ledger Ledger
	// Key returns the de-duplication key of a message (an event id, a
	// producer's idempotency key). An error, or an empty key, fails the
	// message without running the handler (an empty key with an error
	// satisfying errors.Is(err, idem.ErrInvalidKey)): messages without an
	// id are never taken for duplicates of one another. Required.
	Key func(M) (string, error)
	// Handle is the message handler. Required. With a StoreLedger, its ctx
	// is also cancelled, with cause idem.ErrLeaseLost (see
	// context.Cause), when the claim's lease is lost while it runs: taken
	// over by another consumer once it lapsed, or lapsed while heartbeats
	// could not reach the store. The key may then be another delivery's,
	// so the handler should stop. When another delivery took the key
	// over, whatever the handler returns, this delivery cannot mark the key
	// done (Handled comes with an error wrapping idem.ErrStaleToken); when
	// nobody did, a success is marked done as usual. An error it returns
	// after the loss is wrapped with idem.ErrLeaseLost by Handle, if it
	// does not carry it already. A Heartbeat of the store that panics
	// (on the heartbeats' goroutine) is recovered and counts as a loss
	// too; the store being broken, the key is then released rather than
	// marked done, whatever the handler returns, and Handle's error
	// carries the panic as an *idem.PanicError.
	Handle func(ctx context.Context, msg M) error
	// SettleTimeout bounds each call that settles a message's key after the
	// handler: the ledger's Complete after a success, its Release after a
	// failure or a panic. The settle calls ignore the cancellation of
	// Handle's ctx (a message handled must be recorded even when ctx ends
	// as the handler returns), so a ledger whose store has stopped
	// answering would otherwise hold the consumer's goroutine for ever;
	// when the bound runs out, Handle returns the settle call's error
	// (wrapping context.DeadlineExceeded, for a ledger that honours its
	// context as StoreLedger does). A key not marked done may then be
	// handled again on redelivery; a key not released stays claimed until
	// its lease (StoreLedger) or TTL (TrackerLedger) runs out.
	//
	// Defaults to 10 seconds; must not be negative.
	SettleTimeout time.Duration
}

// defaultSettleTimeout is Config.SettleTimeout's default.
const defaultSettleTimeout = 10 * time.Second

// Consumer runs a handler until it succeeds once per message key, one
// delivery at a time: a redelivery of a message already handled is
// acknowledged without running the handler again. Make one with New:
// a Consumer declared without it, or a nil one, fails every message with a
// *ConfigError.
type Consumer[M any] struct {
	cfg Config[M]
}

// errNotMade is what Handle returns on a Consumer not made by New.
var errNotMade = configErrorf("Config", "is missing: the Consumer was not made by New")

// New returns a Consumer, or a *ConfigError naming the Config field that is
// missing or invalid.
func New[M any](cfg Config[M]) (*Consumer[M], error) {
	switch {
	case cfg.Ledger == nil:
		return nil, configErrorf("Config.Ledger", "is required")
	case cfg.Key == nil:
		return nil, configErrorf("Config.Key", "is required")
	case cfg.Handle == nil:
		return nil, configErrorf("Config.Handle", "is required")
	case cfg.SettleTimeout < 0:
		return nil, configErrorf("Config.SettleTimeout", "must not be negative, got %v", cfg.SettleTimeout)
	}
	if l, ok := cfg.Ledger.(misconfigured); ok && l.configErr() != nil {
		return nil, l.configErr()
	}
	if cfg.SettleTimeout == 0 {
		cfg.SettleTimeout = defaultSettleTimeout
	}
	return &Consumer[M]{cfg: cfg}, nil
}

// ConfigError reports a field of a Config, or of the options of a Ledger,
// that New rejected. A StoreLedger's or TrackerLedger's Claim returns it
// too, for a ledger New would reject, and Handle on a Consumer not made by
// New.
type ConfigError struct {
	// Field names the field at fault as a Go expression: "Config.Ledger",
	// "StoreLedgerOpts.Lease".
	Field string
	// Problem says what is wrong with it, as a phrase that follows the
	// field's name ("is required").
	Problem string
}

func (e *ConfigError) Error() string { return "consumer: " + e.Field + " " + e.Problem }

// configErrorf returns a *ConfigError for field.
func configErrorf(field, format string, args ...any) error {
	return &ConfigError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// Handle runs the handler for msg unless its key was handled before or is
// being handled right now. See the package documentation for the outcomes.
// The error is the handler's (Failed; with idem.ErrLeaseLost too when the
// claim was lost while the handler ran, see Config.Handle), the ledger's,
// or ctx's when it is done before the handler starts (Failed, the handler
// did not run; a key claimed as ctx ended is released; a nil ctx is
// idem.ErrInvalidArgument), ErrInProgress
// (InProgress; also an *idem.InFlightError when a RetryAfterLedger said how
// long the key stays held, see ErrInProgress), or nil. Settling the key after the
// handler is bounded by Config.SettleTimeout; when it fails, Handle joins
// its error to the handler's (Failed), or returns Handled with it: the
// message must still be acknowledged, though the key is not marked done
// (a StoreLedger then releases it, when the settle bound leaves time, so
// that a duplicate runs the handler again at once rather than once the
// lease lapses; see StoreLedger).
func (c *Consumer[M]) Handle(ctx context.Context, msg M) (outcome Outcome, err error) {
	if c == nil || c.cfg.Key == nil {
		return Failed, errNotMade
	}
	if ctx == nil {
		return Failed, errNilContext
	}
	key, err := c.cfg.Key(msg)
	if err != nil {
		return Failed, fmt.Errorf("consumer: message key: %w", err)
	}
	if key == "" {
		// Never claimed: on a ledger that took "" as a key, every message
		// without one would be a Duplicate of the first.
		return Failed, errEmptyKey
	}
	if err := ctx.Err(); err != nil {
		// As a store's ledger would fail: a ledger that makes no call
		// (a tracker) must not run the handler on a context already done.
		return Failed, err
	}
	var (
		claim      Claim
		state      State
		retryAfter time.Duration
	)
	if l, ok := c.cfg.Ledger.(RetryAfterLedger); ok {
		claim, state, retryAfter, err = l.ClaimRetryAfter(ctx, key)
	} else {
		claim, state, err = c.cfg.Ledger.Claim(ctx, key)
	}
	if err != nil {
		return Failed, err
	}
	switch state {
	case Done:
		return Duplicate, nil
	case Busy:
		if retryAfter > 0 {
			return InProgress, &inProgressError{inFlight: &idem.InFlightError{RetryAfter: retryAfter}}
		}
		return InProgress, ErrInProgress
	case Claimed:
		if claim == nil {
			return Failed, errors.New("consumer: the ledger answered Claimed without a Claim")
		}
	default:
		return Failed, fmt.Errorf("consumer: ledger answered state %d", state)
	}
	if err := ctx.Err(); err != nil {
		// Ended while the key was claimed: the handler does not start on
		// a context already done, and the redelivery runs it.
		if rerr := c.settle(ctx, claim.Release); rerr != nil {
			return Failed, errors.Join(err, fmt.Errorf("consumer: releasing the key: %w", rerr))
		}
		return Failed, err
	}
	returned := false
	defer func() {
		// A panic, or a handler that never returned (runtime.Goexit, as
		// t.FailNow does): the key is released for the redelivery.
		p := recover()
		if p == nil && returned {
			return
		}
		_ = c.settle(ctx, claim.Release)
		if p != nil {
			panic(p)
		}
	}()
	hctx, lost := ctx, func() bool { return false }
	if w, ok := claim.(watchedClaim); ok {
		var cancel context.CancelCauseFunc
		hctx, cancel = context.WithCancelCause(ctx)
		defer cancel(nil)
		w.watch(cancel)
		lost = func() bool { return errors.Is(context.Cause(hctx), idem.ErrLeaseLost) && ctx.Err() == nil }
	}
	err = c.cfg.Handle(hctx, msg)
	returned = true
	if err != nil {
		wasLost := lost()
		if wasLost && !errors.Is(err, idem.ErrLeaseLost) {
			// The handler most likely failed because its context was
			// cancelled; say why, as a bare context.Canceled reads like
			// the caller's own cancellation.
			err = fmt.Errorf("%w (%w)", err, idem.ErrLeaseLost)
		}
		// A lost claim's key is not held any more: that its release
		// finds it so is no news.
		if rerr := c.settle(ctx, claim.Release); rerr != nil && !(wasLost && errors.Is(rerr, idem.ErrStaleToken)) {
			return Failed, errors.Join(err, fmt.Errorf("consumer: releasing the key: %w", rerr))
		}
		return Failed, err
	}
	if err := c.settle(ctx, claim.Complete); err != nil {
		// The effects happened but are not recorded: a redelivery may run
		// them again. Say so; the message must still be acknowledged or the
		// redelivery certainly runs them again.
		return Handled, fmt.Errorf("consumer: handled, but marking the key done failed: %w", err)
	}
	return Handled, nil
}

// misconfigured is a ledger of this package's, made from arguments it
// cannot work with: New refuses it with configErr.
type misconfigured interface {
	// configErr is the *ConfigError of the ledger's arguments, or nil.
	configErr() error
}

// watchedClaim is a Claim that can tell its handler that it was lost
// while the handler runs (StoreLedger's, whose lease may be taken over).
type watchedClaim interface {
	// watch has cancel called, with cause idem.ErrLeaseLost, when the
	// claim is lost.
	watch(cancel context.CancelCauseFunc)
}

// settle calls Complete or Release (call) with ctx's values but not its
// cancellation, bounded by Config.SettleTimeout.
func (c *Consumer[M]) settle(ctx context.Context, call func(context.Context) error) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.SettleTimeout)
	defer cancel()
	return call(sctx)
}
