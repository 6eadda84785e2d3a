package consumer

import (
	"context"
	"errors"
	"fmt"
)

// Outcome is what Handle did with a message.
type Outcome int

// Outcomes of Handle.
const (
	// Handled: the handler ran and succeeded, and its key is marked done.
	Handled Outcome = iota + 1
	// Duplicate: the key was handled before; the handler did not run.
	Duplicate
	// InProgress: another delivery of the key is being handled right now;
	// the handler did not run. Leave the message for redelivery.
	InProgress
	// Failed: the handler failed or the ledger could not be used; the key
	// is free again. Leave the message for redelivery.
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

// ErrInProgress is the error Handle returns with InProgress.
var ErrInProgress = errors.New("consumer: a delivery with this key is being handled")

// Config configures a Consumer of messages of type M.
type Config[M any] struct {
	// Ledger records which keys are claimed and done. Required.
	Ledger Ledger
	// Key returns the de-duplication key of a message (an event id, a
	// producer's idempotency key). An error fails the message without
	// running the handler. Required.
	Key func(M) (string, error)
	// Handle is the message handler. Required.
	Handle func(ctx context.Context, msg M) error
}

// Consumer runs a handler at most once per message key.
type Consumer[M any] struct {
	cfg Config[M]
}

// New returns a Consumer, or an error naming the missing Config field.
func New[M any](cfg Config[M]) (*Consumer[M], error) {
	switch {
	case cfg.Ledger == nil:
		return nil, errors.New("consumer: Config.Ledger is required")
	case cfg.Key == nil:
		return nil, errors.New("consumer: Config.Key is required")
	case cfg.Handle == nil:
		return nil, errors.New("consumer: Config.Handle is required")
	}
	return &Consumer[M]{cfg: cfg}, nil
}

// Handle runs the handler for msg unless its key was handled before or is
// being handled right now. See the package documentation for the outcomes.
// The error is the handler's (Failed), the ledger's (Failed, the handler did
// not run), ErrInProgress (InProgress), or nil.
func (c *Consumer[M]) Handle(ctx context.Context, msg M) (outcome Outcome, err error) {
	key, err := c.cfg.Key(msg)
	if err != nil {
		return Failed, fmt.Errorf("consumer: message key: %w", err)
	}
	claim, state, err := c.cfg.Ledger.Claim(ctx, key)
	if err != nil {
		return Failed, err
	}
	switch state {
	case Done:
		return Duplicate, nil
	case Busy:
		return InProgress, ErrInProgress
	case Claimed:
	default:
		return Failed, fmt.Errorf("consumer: ledger answered state %d", state)
	}
	settle := context.WithoutCancel(ctx)
	returned := false
	defer func() {
		// A panic, or a handler that never returned (runtime.Goexit, as
		// t.FailNow does): the key is released for the redelivery.
		p := recover()
		if p == nil && returned {
			return
		}
		_ = claim.Release(settle)
		if p != nil {
			panic(p)
		}
	}()
	err = c.cfg.Handle(ctx, msg)
	returned = true
	if err != nil {
		if rerr := claim.Release(settle); rerr != nil {
			return Failed, errors.Join(err, fmt.Errorf("consumer: releasing the key: %w", rerr))
		}
		return Failed, err
	}
	if err := claim.Complete(settle); err != nil {
		// The effects happened but are not recorded: a redelivery may run
		// them again. Say so; the message must still be acknowledged or the
		// redelivery certainly runs them again.
		return Handled, fmt.Errorf("consumer: handled, but marking the key done failed: %w", err)
	}
	return Handled, nil
}
