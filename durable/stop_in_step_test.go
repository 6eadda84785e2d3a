package durable_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemgo/idem/durable"
)

// Stop called from a step, with the step's context, does not deadlock
// waiting for that step: it begins the graceful stop and returns
// ErrStopInStep at once; the step's outcome is committed and the run
// ends.
func TestStopFromAStep(t *testing.T) {
	t.Parallel()
	var client *durable.Client
	stopErr := make(chan error, 1)
	fsm := mustFSM(t, durable.FSMConfig[struct{}]{
		Name: "stopper", Initial: "a",
		Steps: map[string]durable.StepFunc[struct{}]{
			"a": func(ctx context.Context, s *durable.Step[struct{}]) (durable.Outcome, error) {
				stopErr <- client.Stop(ctx)
				return durable.Done(nil), nil
			},
		},
	})
	b := setup(t, fast(fsm))
	client = b.client
	id := b.insert(t, fsm.With(struct{}{}), nil)
	b.start(t)
	select {
	case err := <-stopErr:
		if !errors.Is(err, durable.ErrStopInStep) {
			t.Fatalf("Stop from a step: %v, want ErrStopInStep", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Stop from a step did not return")
	}
	select {
	case <-client.Stopped():
	case <-time.After(20 * time.Second):
		t.Fatal("the run did not end after Stop from a step")
	}
	if in := b.get(t, id); in.Status != durable.StatusDone {
		t.Fatalf("status %s, want done: the step's outcome was not committed", in.Status)
	}
}
