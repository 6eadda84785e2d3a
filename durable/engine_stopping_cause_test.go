package durable_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemgo/idem/durable"
)

// A step cut off by the engine's hard stop sees ErrEngineStopping as the
// cause of its context's cancellation (context.Cause), whichever way the
// stop came (Stop's context ending before the steps, or Start's context
// cancelled), so that it can tell the shutdown from a lost lease
// (ErrLeaseLost) or its own deadline; its row is handed back, its attempt
// unchanged. A step under a StepTimeout sees it too.
func TestHardStopCancelsStepsWithErrEngineStopping(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"stop-deadline", "start-context", "stop-deadline-step-timeout"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			started := make(chan int64, 1)
			causes := make(chan error, 1)
			var stepTimeout time.Duration // none
			if how == "stop-deadline-step-timeout" {
				stepTimeout = time.Hour
			}
			fsm := mustFSM(t, durable.FSMConfig[struct{}]{
				Name: "cause", Initial: "a", StepTimeout: stepTimeout,
				Steps: map[string]durable.StepFunc[struct{}]{
					"a": func(ctx context.Context, s *durable.Step[struct{}]) (durable.Outcome, error) {
						started <- s.ID
						<-ctx.Done()
						causes <- context.Cause(ctx)
						return durable.Outcome{}, context.Cause(ctx)
					},
				},
			})
			b := setup(t, fast(fsm))
			startCtx, cancelStart := context.WithCancel(context.Background())
			defer cancelStart()
			if err := b.client.Start(startCtx); err != nil {
				t.Fatal(err)
			}
			id := b.insert(t, fsm.With(struct{}{}), nil)
			<-started
			if how == "start-context" {
				cancelStart()
				select {
				case <-b.client.Stopped():
				case <-time.After(20 * time.Second):
					t.Fatal("the engine did not stop within 20 s of Start's context being cancelled")
				}
			} else {
				hardStop(t, b)
			}
			if cause := <-causes; !errors.Is(cause, durable.ErrEngineStopping) {
				t.Fatalf("the step's context was cancelled with cause %v; want ErrEngineStopping", cause)
			}
			if in := b.get(t, id); in.Status != durable.StatusRunnable || in.Attempt != 1 {
				t.Fatalf("after the hard stop: status %s, attempt %d; want runnable at attempt 1", in.Status, in.Attempt)
			}
		})
	}
}
