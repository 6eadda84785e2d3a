package durable_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgo/idem/durable"
)

// TestErrorHandlerZeroOutcomeGetsTheDefaultHandling checks the idiom the
// ErrorHandler doc gives: a handler that decides on some errors only
// returns the zero Outcome for the others, which the default handling then
// retries with the FSM's Backoff up to its MaxAttempts before it stops the
// instance with the error's text.
func TestErrorHandlerZeroOutcomeGetsTheDefaultHandling(t *testing.T) {
	t.Parallel()
	errFlaky := errors.New("provider: 503")
	var backoffCalls atomic.Int32
	fsm := mustFSM(t, durable.FSMConfig[string]{
		Name: "zero-outcome-handler", Initial: "charge", MaxAttempts: 3,
		Backoff: func(int) time.Duration { backoffCalls.Add(1); return 0 },
		Steps: map[string]durable.StepFunc[string]{
			"charge": func(context.Context, *durable.Step[string]) (durable.Outcome, error) {
				return durable.Outcome{}, errFlaky
			},
		},
		OnError: func(_ context.Context, _ *durable.Step[string], err error) durable.Outcome {
			if errors.Is(err, errDeclinedInTest) {
				return durable.Stop("declined")
			}
			return durable.Outcome{} // the default handling
		},
	})
	b := setup(t, fast(fsm))
	b.start(t)

	id := b.insert(t, fsm.With(""), nil)
	in := b.waitStatus(t, id, durable.StatusFailed)
	if in.Attempt != 3 || in.Error != errFlaky.Error() {
		t.Errorf("failed at attempt %d with %q, want attempt 3 (MaxAttempts) with %q", in.Attempt, in.Error, errFlaky)
	}
	if n := backoffCalls.Load(); n != 2 {
		t.Errorf("Backoff called %d times, want 2 (after attempts 1 and 2)", n)
	}
}

var errDeclinedInTest = errors.New("declined")
