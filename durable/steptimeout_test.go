package durable_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgo/idem/durable"
)

// A step that honours its context and fails when StepTimeout cancels it
// gets the error handling with an error matching ErrStepTimeout and its
// own error; a step that finishes in time is untouched.
func TestStepTimeoutCancelsTheStep(t *testing.T) {
	t.Parallel()
	var handled atomic.Value // the error OnError saw
	fsm := mustFSM(t, durable.FSMConfig[int]{
		Name: "slow", Initial: "wait", MaxAttempts: 1, StepTimeout: 100 * time.Millisecond,
		Steps: map[string]durable.StepFunc[int]{
			"wait": func(ctx context.Context, s *durable.Step[int]) (durable.Outcome, error) {
				if s.State == 0 { // quick
					return durable.Done("quick"), nil
				}
				<-ctx.Done()
				return durable.Outcome{}, ctx.Err()
			},
		},
		OnError: func(_ context.Context, s *durable.Step[int], err error) durable.Outcome {
			handled.Store(err)
			return durable.Stop(err.Error())
		},
	})
	b := setup(t, fast(fsm))
	b.start(t)
	quick := b.insert(t, fsm.With(0), nil)
	slow := b.insert(t, fsm.With(1), nil)

	b.waitStatus(t, quick, durable.StatusDone)
	in := b.waitStatus(t, slow, durable.StatusFailed)
	err, _ := handled.Load().(error)
	var te *durable.StepTimeoutError
	if !errors.Is(err, durable.ErrStepTimeout) || !errors.Is(err, context.DeadlineExceeded) ||
		!errors.As(err, &te) || te.Timeout != 100*time.Millisecond {
		t.Fatalf("OnError saw %v, want a *StepTimeoutError of 100ms wrapping context.DeadlineExceeded", err)
	}
	if !strings.Contains(in.Error, "timed out after 100ms") {
		t.Fatalf("instance error %q", in.Error)
	}
	b.noStuckRows(t)
}

// A step that ignores its context keeps running past StepTimeout, but its
// lease is no longer extended: the reaper takes the row back and another
// run finishes the instance, while the stuck call's late outcome is fenced
// off.
func TestStepTimeoutLetsTheReaperTakeAStuckStep(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var runs atomic.Int32
	fsm := mustFSM(t, durable.FSMConfig[int]{
		Name: "stuck", Initial: "hang", StepTimeout: 50 * time.Millisecond,
		Steps: map[string]durable.StepFunc[int]{
			"hang": func(ctx context.Context, s *durable.Step[int]) (durable.Outcome, error) {
				if runs.Add(1) == 1 {
					<-release // ignores ctx
					return durable.Done("late"), nil
				}
				return durable.Done("second"), nil
			},
		},
	})
	cfg := fast(fsm)
	cfg.LeaseTTL, cfg.HeartbeatInterval, cfg.ReaperInterval = 600*time.Millisecond, 100*time.Millisecond, 50*time.Millisecond
	b := setup(t, cfg)
	b.start(t)
	t.Cleanup(func() { close(release) })
	id := b.insert(t, fsm.With(0), nil)

	in := b.waitStatus(t, id, durable.StatusDone)
	if runs.Load() != 2 || in.Attempt != 2 || string(in.Result) != `"second"` {
		t.Fatalf("runs %d, attempt %d, result %s: want the second run's result on attempt 2", runs.Load(), in.Attempt, in.Result)
	}
}

// Without a StepTimeout the heartbeat keeps a long step's lease, however
// short the lease: the step runs once. The step outlives its lease twice
// over; the lease, 60 heartbeats long, leaves them 2.95 s of slack: a
// -race suite on two loaded cores may delay a few by more than the 1.45 s
// this test once allowed, and the engine cancels a step whose lease no
// heartbeat sent within a lease extended, without waiting for a reaper.
func TestNoStepTimeoutKeepsTheLease(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	fsm := mustFSM(t, durable.FSMConfig[int]{
		Name: "long", Initial: "work",
		Steps: map[string]durable.StepFunc[int]{
			"work": func(ctx context.Context, s *durable.Step[int]) (durable.Outcome, error) {
				runs.Add(1)
				select {
				case <-time.After(2 * noTimeoutLease):
				case <-ctx.Done():
					return durable.Outcome{}, ctx.Err()
				}
				return durable.Done("ok"), nil
			},
		},
	})
	cfg := fast(fsm)
	cfg.LeaseTTL, cfg.HeartbeatInterval, cfg.ReaperInterval = noTimeoutLease, 50*time.Millisecond, 50*time.Millisecond
	b := setup(t, cfg)
	b.start(t)
	id := b.insert(t, fsm.With(0), nil)
	if in := b.waitStatus(t, id, durable.StatusDone); runs.Load() != 1 || in.Attempt != 1 {
		t.Fatalf("runs %d, attempt %d: want one run", runs.Load(), in.Attempt)
	}
}

// noTimeoutLease is the lease of TestNoStepTimeoutKeepsTheLease.
const noTimeoutLease = 3 * time.Second

func TestStepTimeoutMustNotBeNegative(t *testing.T) {
	_, err := durable.NewFSM(durable.FSMConfig[int]{
		Name: "x", Initial: "a", StepTimeout: -time.Second,
		Steps: map[string]durable.StepFunc[int]{"a": func(context.Context, *durable.Step[int]) (durable.Outcome, error) {
			return durable.Done(nil), nil
		}},
	})
	var ce *durable.ConfigError
	if !errors.As(err, &ce) || ce.Field != "FSMConfig.StepTimeout" {
		t.Fatalf("NewFSM: %v, want a ConfigError for FSMConfig.StepTimeout", err)
	}
}
