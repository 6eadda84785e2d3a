package durable_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/idemgo/idem/durable"
)

var errFlaky = errors.New("flaky upstream")

func TestErrorHandlerChoosesOutcome(t *testing.T) {
	t.Parallel()
	handled := make(chan error, 2)
	fsm := mustFSM(t, durable.FSMConfig[counter]{
		Name:    "handled",
		Initial: "a",
		Steps: map[string]durable.StepFunc[counter]{
			"a": func(_ context.Context, s *durable.Step[counter]) (durable.Outcome, error) {
				s.State.N = 999 // discarded: the step fails
				if s.CorrelationKey == "panic" {
					panic(errFlaky)
				}
				return durable.Next("unreached"), errFlaky
			},
			"recover": func(_ context.Context, s *durable.Step[counter]) (durable.Outcome, error) {
				return durable.Done(s.State.N), nil
			},
			"unreached": func(context.Context, *durable.Step[counter]) (durable.Outcome, error) {
				return durable.Stop("unreached"), nil
			},
		},
		OnError: func(_ context.Context, s *durable.Step[counter], err error) durable.Outcome {
			handled <- err
			s.State.N++ // kept: the handler's outcome is committed with it
			return durable.Next("recover")
		},
	})
	b := setup(t, fast(fsm))
	b.start(t)

	id := b.insert(t, fsm.With(counter{N: 1}), nil)
	if err := <-handled; !errors.Is(err, errFlaky) {
		t.Fatalf("handler got %v", err)
	}
	if in := b.waitStatus(t, id, durable.StatusDone); string(in.Result) != "2" {
		t.Fatalf("result %s, want 2: the step's changes discarded, the handler's kept", in.Result)
	}

	id = b.insert(t, fsm.With(counter{N: 1}), &durable.InsertOpts{CorrelationKey: "panic"})
	err := <-handled
	var pe *durable.PanicError
	if !errors.As(err, &pe) || pe.Value != errFlaky || !errors.Is(err, errFlaky) || len(pe.Stack) == 0 || pe.What != "step" {
		t.Fatalf("handler got %v (%T), want a *PanicError of the step wrapping the panic", err, err)
	}
	if in := b.waitStatus(t, id, durable.StatusDone); string(in.Result) != "2" {
		t.Fatalf("result %s, want 2", in.Result)
	}
	for _, e := range b.events.stepEvents() {
		if e.Step == "a" && (e.Err == nil || e.Kind != durable.KindNext) {
			t.Fatalf("step event %+v, want the error and the handler's outcome", e)
		}
	}
}

func TestDefaultErrorHandlingRetriesThenStops(t *testing.T) {
	t.Parallel()
	attempts := make(chan int, 10)
	var backoffs []int
	fsm := mustFSM(t, durable.FSMConfig[struct{}]{
		Name:        "flaky",
		Initial:     "a",
		MaxAttempts: 3,
		Backoff: func(attempt int) time.Duration {
			backoffs = append(backoffs, attempt) // called by one worker at a time
			return time.Millisecond
		},
		Steps: map[string]durable.StepFunc[struct{}]{
			"a": func(_ context.Context, s *durable.Step[struct{}]) (durable.Outcome, error) {
				attempts <- s.Attempt
				if s.CorrelationKey == "panic" {
					panic("boom")
				}
				return durable.Outcome{}, errFlaky
			},
		},
		// A handler that panics gets the default handling too.
		OnError: func(_ context.Context, s *durable.Step[struct{}], err error) durable.Outcome {
			if s.CorrelationKey == "panic" {
				return durable.Outcome{} // cannot be committed: default handling
			}
			panic("handler panics")
		},
	})
	cfg := fast(fsm)
	cfg.Queues = map[string]durable.QueueConfig{durable.DefaultQueue: {Concurrency: 1}}
	b := setup(t, cfg)
	b.start(t)

	for _, tc := range []struct{ key, reason string }{
		{"error", errFlaky.Error()},
		{"panic", "durable: step panicked: boom"},
	} {
		id := b.insert(t, fsm.With(struct{}{}), &durable.InsertOpts{CorrelationKey: tc.key})
		in := b.waitStatus(t, id, durable.StatusFailed)
		if in.Error != tc.reason || in.Attempt != 3 {
			t.Fatalf("%s: failed with %q at attempt %d, want %q at 3", tc.key, in.Error, in.Attempt, tc.reason)
		}
		var got []int
		for range 3 {
			got = append(got, <-attempts)
		}
		if diff := cmp.Diff([]int{1, 2, 3}, got); diff != "" {
			t.Fatalf("%s: attempts (-want +got):\n%s", tc.key, diff)
		}
	}
	if diff := cmp.Diff([]int{1, 2, 1, 2}, backoffs); diff != "" {
		t.Fatalf("backoff attempts (-want +got):\n%s", diff)
	}
}

func TestRetryFromErrorRecordsTheError(t *testing.T) {
	t.Parallel()
	fsm := mustFSM(t, durable.FSMConfig[struct{}]{
		Name: "slow-retry", Initial: "a",
		Steps: map[string]durable.StepFunc[struct{}]{
			"a": func(context.Context, *durable.Step[struct{}]) (durable.Outcome, error) {
				return durable.Outcome{}, errFlaky
			},
		},
	})
	b := setup(t, fast(fsm))
	b.start(t)
	id := b.insert(t, fsm.With(struct{}{}), nil)
	var in *durable.Instance
	waitFor(t, "the retry", func() bool { in = b.get(t, id); return in.Attempt == 2 })
	// DefaultBackoff(1) is 0.9 to 1 s, from the commit (updated_at).
	if in.Error != errFlaky.Error() || in.Status != durable.StatusRunnable || in.EligibleAt.Sub(in.UpdatedAt) < 900*time.Millisecond {
		t.Fatalf("after a default retry: %+v", in)
	}
}

func TestUnknownFSMIsRetried(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	other := mustFSM(t, durable.FSMConfig[int]{Name: "other", Initial: "a", Steps: map[string]durable.StepFunc[int]{
		"a": func(context.Context, *durable.Step[int]) (durable.Outcome, error) { return durable.Done(nil), nil },
	}})
	b := setup(t, fast(ctl)) // runs ctl only
	b.start(t)
	id := b.insert(t, other.With(7), nil)
	waitFor(t, "the retry", func() bool { return b.get(t, id).Attempt == 2 })
	in := b.get(t, id)
	if in.Status != durable.StatusRunnable || !strings.Contains(in.Error, "not registered") || string(in.State) != "7" {
		t.Fatalf("row of an unknown FSM: %+v", in)
	}
}

func TestDefaultBackoff(t *testing.T) {
	t.Parallel()
	for attempt, want := range map[int]time.Duration{
		1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 10: 512 * time.Second,
		12: 2048 * time.Second, 13: time.Hour, 1000: time.Hour, 0: time.Second,
	} {
		for range 20 {
			got := durable.DefaultBackoff(attempt)
			if got > want || got < want*9/10 {
				t.Fatalf("DefaultBackoff(%d) = %s, want within [%s, %s]", attempt, got, want*9/10, want)
			}
		}
	}
}

func TestUndecodableStateIsKept(t *testing.T) {
	t.Parallel()
	handled := make(chan error, 1)
	fsm := mustFSM(t, durable.FSMConfig[int]{
		Name: "typed", Initial: "a",
		Steps: map[string]durable.StepFunc[int]{
			"a": func(context.Context, *durable.Step[int]) (durable.Outcome, error) { return durable.Done(nil), nil },
		},
		OnError: func(_ context.Context, s *durable.Step[int], err error) durable.Outcome {
			handled <- err
			s.State = 7 // not committed over a state that could not be read
			return durable.Stop("cannot read state")
		},
	})
	b := setup(t, fast(fsm))
	id := b.insert(t, fsm.With(1), nil)
	b.exec(t, `UPDATE durable_instance SET state = '"not a number"' WHERE id = $1`, id)
	b.start(t)
	if err := <-handled; err == nil || !strings.Contains(err.Error(), "does not decode") {
		t.Fatalf("handler got %v", err)
	}
	if in := b.waitStatus(t, id, durable.StatusFailed); string(in.State) != `"not a number"` {
		t.Fatalf("state %s after a decode failure", in.State)
	}
}
