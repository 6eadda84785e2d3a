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

// A row scheduled for later starts when it becomes eligible, not at the
// picker's next poll: the picker arms its timer for the earliest eligible
// time it knows of, learnt from its claims (a row scheduled before the
// engine started) or from this engine's own inserts, retries and
// commits. With an hourly poll, only that timer can start the row.
func TestScheduledRowStartsWhenEligibleNotAtTheNextPoll(t *testing.T) {
	t.Parallel()
	const delay = 500 * time.Millisecond
	// run makes the scheduled row, given the bundle (the engine not yet
	// started if started is false), and returns the moment it is
	// eligible, as the test's clock sees it.
	type scheduler struct {
		started bool
		run     func(t *testing.T, b *testBundle, fsm *durable.FSM[struct{}]) time.Time
	}
	cases := map[string]scheduler{
		"scheduled-before-start": {false, func(t *testing.T, b *testBundle, fsm *durable.FSM[struct{}]) time.Time {
			b.insert(t, fsm.With(struct{}{}), &durable.InsertOpts{CorrelationKey: "done", ScheduleIn: delay})
			return time.Now().Add(delay)
		}},
		"insert-schedule-in": {true, func(t *testing.T, b *testBundle, fsm *durable.FSM[struct{}]) time.Time {
			b.insert(t, fsm.With(struct{}{}), &durable.InsertOpts{CorrelationKey: "done", ScheduleIn: delay})
			return time.Now().Add(delay)
		}},
		// A row that names a rate-limit bucket is claimed by claimSQL,
		// not claimFreeSQL: its claims, too, must learn of it.
		"rate-limited-scheduled-before-start": {false, func(t *testing.T, b *testBundle, fsm *durable.FSM[struct{}]) time.Time {
			b.insert(t, fsm.With(struct{}{}), &durable.InsertOpts{CorrelationKey: "done", ScheduleIn: delay, RateLimit: "api"})
			return time.Now().Add(delay)
		}},
		"rate-limited-insert-schedule-in": {true, func(t *testing.T, b *testBundle, fsm *durable.FSM[struct{}]) time.Time {
			b.insert(t, fsm.With(struct{}{}), &durable.InsertOpts{CorrelationKey: "done", ScheduleIn: delay, RateLimit: "api"})
			return time.Now().Add(delay)
		}},
		"insert-eligible-at": {true, func(t *testing.T, b *testBundle, fsm *durable.FSM[struct{}]) time.Time {
			at := time.Now().Add(delay)
			b.insert(t, fsm.With(struct{}{}), &durable.InsertOpts{CorrelationKey: "done", EligibleAt: at})
			return at
		}},
		"insert-all": {true, func(t *testing.T, b *testBundle, fsm *durable.FSM[struct{}]) time.Time {
			if _, err := b.client.InsertAll(ctxT(t), []durable.InsertParams{{Args: fsm.With(struct{}{}),
				Opts: &durable.InsertOpts{CorrelationKey: "done", ScheduleIn: delay}}}); err != nil {
				t.Fatal(err)
			}
			return time.Now().Add(delay)
		}},
		"retry-outcome": {true, func(t *testing.T, b *testBundle, fsm *durable.FSM[struct{}]) time.Time {
			b.insert(t, fsm.With(struct{}{}), &durable.InsertOpts{CorrelationKey: "retry"})
			return time.Time{} // the step reports it
		}},
		"backoff": {true, func(t *testing.T, b *testBundle, fsm *durable.FSM[struct{}]) time.Time {
			b.insert(t, fsm.With(struct{}{}), &durable.InsertOpts{CorrelationKey: "fail"})
			return time.Time{}
		}},
		"client-retry-at": {true, func(t *testing.T, b *testBundle, fsm *durable.FSM[struct{}]) time.Time {
			id := b.insert(t, fsm.With(struct{}{}), &durable.InsertOpts{CorrelationKey: "stop"})
			b.waitStatus(t, id, durable.StatusFailed)
			at := time.Now().Add(delay)
			if _, err := b.client.Retry(ctxT(t), durable.ByID(id), &durable.RetryOpts{At: at}); err != nil {
				t.Fatal(err)
			}
			return at
		}},
	}
	for name, sc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			type run struct {
				at    time.Time
				picks int // the picks so far, this one included
			}
			ran := make(chan run, 4)
			var b *testBundle
			// retryAt is when the Retry outcome's row is eligible again.
			var retryAt atomic.Pointer[time.Time]
			var stopped atomic.Bool
			fsm := mustFSM(t, durable.FSMConfig[struct{}]{
				Name: "later", Initial: "a",
				Backoff: func(int) time.Duration {
					at := time.Now().Add(delay)
					retryAt.Store(&at)
					return delay
				},
				Steps: map[string]durable.StepFunc[struct{}]{
					"a": func(_ context.Context, s *durable.Step[struct{}]) (durable.Outcome, error) {
						switch {
						case s.CorrelationKey == "retry" && s.Attempt == 1:
							at := time.Now().Add(delay)
							retryAt.Store(&at)
							return durable.Retry(delay), nil
						case s.CorrelationKey == "fail" && s.Attempt == 1:
							return durable.Outcome{}, errors.New("once")
						case s.CorrelationKey == "stop" && !stopped.Swap(true):
							return durable.Stop("once"), nil
						}
						b.events.mu.Lock()
						picks := len(b.events.picks)
						b.events.mu.Unlock()
						ran <- run{time.Now(), picks}
						return durable.Done(nil), nil
					},
				},
			})
			cfg := fast(fsm)
			cfg.PollInterval = time.Hour
			cfg.PollOnly = true // no hint, no listener's poke: only the picker's timer
			cfg.RateLimits = map[string]durable.RateLimit{"api": {Limit: 100, Burst: 10}}
			b = setup(t, cfg)
			var eligible time.Time
			if !sc.started {
				eligible = sc.run(t, b, fsm)
			}
			b.start(t)
			waitFor(t, "the first pick", func() bool {
				b.events.mu.Lock()
				defer b.events.mu.Unlock()
				return len(b.events.picks) > 0
			})
			b.events.mu.Lock()
			picks := len(b.events.picks)
			b.events.mu.Unlock()
			if sc.started {
				eligible = sc.run(t, b, fsm)
			}
			select {
			case r := <-ran:
				at := r.at
				if eligible.IsZero() {
					eligible = *retryAt.Load()
				}
				// The test's clock is read after the database's:
				// the step may seem to start a little early.
				if late := at.Sub(eligible); late < -100*time.Millisecond || late > 5*time.Second {
					t.Fatalf("the step started %s after the row became eligible; want within 5 s", late)
				}
				// A row this engine inserted for later moves the picker's
				// timer without a claim: the one claim since is the one
				// that took it.
				if strings.Contains(name, "insert") && r.picks != picks+1 {
					t.Fatalf("%d picks from the insert to the step; want 1, the one that took the row", r.picks-picks)
				}
			case <-time.After(15 * time.Second):
				t.Fatal("the scheduled row did not start within 15 s of its eligible time: it waits for the next poll (PollInterval 1 h)")
			}
		})
	}
}
