package durable_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem/durable"
)

// These tests pin that bad input a step meets ends in a visible failure,
// never in a row left executing or a queue that stops serving others.

// noStuckRows fails t if a row is still leased.
func (b *testBundle) noStuckRows(t *testing.T) {
	t.Helper()
	if n := b.count(t, "SELECT count(*) FROM durable_instance WHERE status = 'executing' OR lease_owner IS NOT NULL"); n != 0 {
		t.Fatalf("%d rows left leased", n)
	}
}

func TestUnknownStepsFailWithoutStuckRows(t *testing.T) {
	t.Parallel()
	fsm := mustFSM(t, durable.FSMConfig[int]{
		Name: "lost", Initial: "next", MaxAttempts: 2,
		Backoff: func(int) time.Duration { return 0 },
		Steps: map[string]durable.StepFunc[int]{
			"next": func(context.Context, *durable.Step[int]) (durable.Outcome, error) {
				return durable.Next("nowhere"), nil
			},
			"await": func(context.Context, *durable.Step[int]) (durable.Outcome, error) {
				return durable.Await("nowhere", "x"), nil
			},
			"ok": func(context.Context, *durable.Step[int]) (durable.Outcome, error) { return durable.Done("ok"), nil },
		},
	})
	cfg := fast(fsm)
	cfg.Queues = map[string]durable.QueueConfig{durable.DefaultQueue: {Concurrency: 1}}
	b := setup(t, cfg)
	next := b.insert(t, fsm.With(0), nil)
	await := b.insert(t, fsm.With(0), &durable.InsertOpts{Step: "await"})
	// A row naming a step the definition no longer has, as after a deploy
	// that removed it.
	gone := b.insert(t, fsm.With(0), &durable.InsertOpts{Step: "ok"})
	b.exec(t, `UPDATE durable_instance SET step = 'removed' WHERE id = $1`, gone)
	b.start(t)

	for id, want := range map[int64]string{next: `"nowhere"`, await: `"nowhere"`, gone: `"removed"`} {
		in := b.waitStatus(t, id, durable.StatusFailed)
		if !strings.Contains(in.Error, durable.ErrUnknownStep.Error()) || !strings.Contains(in.Error, want) || in.Attempt != 2 {
			t.Errorf("instance %d: attempt %d, error %q", id, in.Attempt, in.Error)
		}
	}
	ok := b.insert(t, fsm.With(0), &durable.InsertOpts{Step: "ok"})
	b.waitStatus(t, ok, durable.StatusDone)
	b.noStuckRows(t)
}

func TestUndecodableStateFailsVisiblyAndTheQueueGoesOn(t *testing.T) {
	t.Parallel()
	fsm := mustFSM(t, durable.FSMConfig[int]{
		Name: "typed", Initial: "a", MaxAttempts: 3,
		Backoff: func(int) time.Duration { return time.Hour },
		Steps: map[string]durable.StepFunc[int]{
			"a": func(_ context.Context, s *durable.Step[int]) (durable.Outcome, error) {
				return durable.Done(s.State), nil
			},
		},
	})
	cfg := fast(fsm)
	cfg.Queues = map[string]durable.QueueConfig{durable.DefaultQueue: {Concurrency: 1}}
	b := setup(t, cfg)
	bad := b.insert(t, fsm.With(1), &durable.InsertOpts{Priority: -1}) // picked first
	b.exec(t, `UPDATE durable_instance SET state = '{"not": "an int"}' WHERE id = $1`, bad)
	good := b.insert(t, fsm.With(2), nil)
	b.start(t)

	// The failure is visible on the row while it waits for its retry...
	var in *durable.Instance
	waitFor(t, "the decode failure to be recorded", func() bool {
		in = b.get(t, bad)
		return in.Attempt == 2
	})
	if !strings.Contains(in.Error, "does not decode") || string(in.State) != `{"not": "an int"}` {
		t.Fatalf("after the first attempt: error %q, state %s", in.Error, in.State)
	}
	// ...and the queue, with one worker, serves the others.
	if in := b.waitStatus(t, good, durable.StatusDone); string(in.Result) != "2" {
		t.Fatalf("good instance's result %s", in.Result)
	}
	// The last attempt stops it, with the state kept for repair.
	b.exec(t, `UPDATE durable_instance SET attempt = 3, eligible_at = now() WHERE id = $1`, bad)
	in = b.waitStatus(t, bad, durable.StatusFailed)
	if !strings.Contains(in.Error, "does not decode") || string(in.State) != `{"not": "an int"}` {
		t.Fatalf("failed: error %q, state %s", in.Error, in.State)
	}
	b.noStuckRows(t)
}
