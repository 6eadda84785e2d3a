package durable_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem/durable"
)

// nilDerefError is an error whose methods dereference their receiver:
// returned as a typed nil (the classic `var err *nilDerefError; return
// out, err`), its Error and Unwrap panic.
type nilDerefError struct {
	msg   string
	cause error
}

func (e *nilDerefError) Error() string { return e.msg }
func (e *nilDerefError) Unwrap() error { return e.cause }

// A step error whose Error and Unwrap methods panic (a typed nil) is a
// step failure like any other: the engine records a text for it and its
// error handling goes on (a retry, then the stop), and the failure is
// logged, instead of the worker panicking, which would take
// the process down, and, the row being reaped and run again, every engine
// that picks it in turn.
func TestStepErrorWhoseErrorMethodPanicsIsAFailure(t *testing.T) {
	t.Parallel()
	f := mustFSM(t, durable.FSMConfig[struct{}]{
		Name: "nil-error", Initial: "a", MaxAttempts: 2,
		Backoff: func(int) time.Duration { return 0 },
		Steps: map[string]durable.StepFunc[struct{}]{
			"a": func(context.Context, *durable.Step[struct{}]) (durable.Outcome, error) {
				var err *nilDerefError
				return durable.Next("a"), err
			},
		},
	})
	b := setup(t, fast(f))
	b.start(t)
	id := b.insert(t, f.With(struct{}{}), nil)
	in := b.waitStatus(t, id, durable.StatusFailed)
	if in.Attempt != 2 || !strings.Contains(in.Error, "<nil>") {
		t.Fatalf("instance failed at attempt %d with error %q; want attempt 2 and an error text naming the nil error", in.Attempt, in.Error)
	}
}
