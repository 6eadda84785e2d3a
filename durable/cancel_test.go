package durable_test

import (
	"context"
	"errors"
	"testing"

	"github.com/idemgo/idem/durable"
)

func TestCancelParkedInstanceByKey(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	b := setup(t, nil)
	id := b.insert(t, ctl.With(ctlState{}), &durable.InsertOpts{CorrelationKey: "order:1"})
	b.signal(t, durable.ByID(id), "x", nil, "")

	if err := b.client.Cancel(ctxT(t), durable.ByKey("order:1"), "customer left"); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	in := b.get(t, id)
	if in.Status != durable.StatusCancelled || in.Error != "customer left" || in.FinishedAt.IsZero() ||
		len(in.Inbox) != 0 || in.LeaseOwner != "" {
		t.Fatalf("cancelled instance: status %s, error %q, finished %v, inbox %d, lease %q",
			in.Status, in.Error, in.FinishedAt, len(in.Inbox), in.LeaseOwner)
	}
	// The key is free again, and signals no longer reach the instance.
	if err := b.client.Signal(ctxT(t), durable.ByID(id), "go", nil, ""); !errors.Is(err, durable.ErrNoTarget) {
		t.Fatalf("Signal to a cancelled instance: %v, want ErrNoTarget", err)
	}
	b.insert(t, ctl.With(ctlState{}), &durable.InsertOpts{CorrelationKey: "order:1"})
}

func TestCancelErrors(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	b := setup(t, nil)
	id := b.insert(t, ctl.With(ctlState{}), &durable.InsertOpts{CorrelationKey: "k"})
	if err := b.client.Cancel(ctxT(t), durable.ByID(id), ""); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		target durable.Target
		want   error
	}{
		{durable.ByID(id), durable.ErrTerminal},
		{durable.ByKey("k"), durable.ErrNoTarget},
		{durable.ByID(id + 100), durable.ErrNoTarget},
		{durable.Target{}, durable.ErrNoTarget},
	} {
		if err := b.client.Cancel(ctxT(t), tc.target, "again"); !errors.Is(err, tc.want) {
			t.Errorf("Cancel(%v): %v, want %v", tc.target, err, tc.want)
		}
	}
	if in := b.get(t, id); in.Error != "" {
		t.Errorf("a failed Cancel changed the error to %q", in.Error)
	}
}

// A step running while its instance is cancelled cannot commit: its Next
// is fenced off and the row stays cancelled, at the step it was at.
func TestCancelFencesTheRunningStep(t *testing.T) {
	t.Parallel()
	entered, release := make(chan struct{}), make(chan struct{})
	fsm := mustFSM(t, durable.FSMConfig[ctlState]{
		Name: "blocker", Initial: "block",
		Steps: map[string]durable.StepFunc[ctlState]{
			"block": func(ctx context.Context, s *durable.Step[ctlState]) (durable.Outcome, error) {
				close(entered)
				<-release
				s.State.Seen = append(s.State.Seen, "ran")
				return durable.Next("after"), nil
			},
			"after": func(ctx context.Context, s *durable.Step[ctlState]) (durable.Outcome, error) {
				return durable.Done(nil), nil
			},
		},
	})
	b := setup(t, fast(fsm))
	id := b.insert(t, fsm.With(ctlState{}), nil)
	b.start(t)
	<-entered
	if err := b.client.Cancel(ctxT(t), durable.ByID(id), "stop it"); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	close(release)
	waitFor(t, "the step's commit", func() bool { return len(b.events.stepEvents()) > 0 })
	if e := b.events.stepEvents()[0]; e.ID != id || e.Kind != durable.KindNext || !e.Fenced {
		t.Fatalf("step event %+v, want a fenced next of instance %d", e, id)
	}
	in := b.get(t, id)
	if in.Status != durable.StatusCancelled || in.Step != "block" || string(in.State) != "{}" || in.Error != "stop it" {
		t.Fatalf("after the fenced commit: status %s, step %s, state %s, error %q", in.Status, in.Step, in.State, in.Error)
	}
}

func TestCancelOutcome(t *testing.T) {
	t.Parallel()
	fsm := mustFSM(t, durable.FSMConfig[ctlState]{
		Name: "selfcancel", Initial: "wait",
		Steps: map[string]durable.StepFunc[ctlState]{
			"wait": func(ctx context.Context, s *durable.Step[ctlState]) (durable.Outcome, error) {
				if len(s.Awaited) > 0 {
					return durable.Cancel("not wanted"), nil
				}
				return durable.Await("wait", "cancel"), nil
			},
		},
	})
	b := setup(t, fast(fsm))
	id := b.insert(t, fsm.With(ctlState{}), &durable.InsertOpts{CorrelationKey: "self"})
	b.signal(t, durable.ByID(id), "other", nil, "")
	b.start(t)
	b.signal(t, durable.ByKey("self"), "cancel", nil, "")
	in := b.waitStatus(t, id, durable.StatusCancelled)
	if in.Error != "not wanted" || len(in.Inbox) != 0 || in.FinishedAt.IsZero() {
		t.Fatalf("cancelled by its step: error %q, inbox %d, finished %v", in.Error, len(in.Inbox), in.FinishedAt)
	}
	if got := durable.Cancel("r").String(); got != "cancel(r)" {
		t.Errorf("String() = %q", got)
	}
}
