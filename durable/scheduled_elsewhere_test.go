package durable_test

import (
	"context"
	"testing"
	"time"

	"github.com/idemgo/idem/durable"
)

// A row that another process makes eligible later (a Client that never
// starts an engine inserts it with ScheduleIn, EligibleAt or InsertAll,
// in a transaction of its own or not, or retries a failed instance with
// RetryOpts.At) starts when it becomes eligible on a listening engine
// whose picker polls once a minute: the hint the insert or retry sends
// carries when the row is due, and the engine arms its picker's timer for
// it. So does a row made eligible at a moment already past, which starts
// at once.
func TestRowScheduledByAnotherProcessStartsWhenEligible(t *testing.T) {
	t.Parallel()
	const delay = 300 * time.Millisecond
	// schedule makes the row through other, a client with no engine, and
	// returns the moment it is eligible, as the test's clock sees it
	// before the call (the row is eligible no sooner).
	cases := map[string]func(t *testing.T, b *testBundle, other *durable.Client, fsm *durable.FSM[struct{}]) time.Time{
		"insert-schedule-in": func(t *testing.T, _ *testBundle, other *durable.Client, fsm *durable.FSM[struct{}]) time.Time {
			at := time.Now().Add(delay)
			if _, err := other.Insert(ctxT(t), fsm.With(struct{}{}), &durable.InsertOpts{Queue: "later", ScheduleIn: delay}); err != nil {
				t.Fatal(err)
			}
			return at
		},
		"insert-schedule-at": func(t *testing.T, _ *testBundle, other *durable.Client, fsm *durable.FSM[struct{}]) time.Time {
			at := time.Now().Add(delay)
			if _, err := other.Insert(ctxT(t), fsm.With(struct{}{}), &durable.InsertOpts{Queue: "later", ScheduleAt: at}); err != nil {
				t.Fatal(err)
			}
			return at
		},
		"insert-eligible-at-past": func(t *testing.T, _ *testBundle, other *durable.Client, fsm *durable.FSM[struct{}]) time.Time {
			at := time.Now()
			if _, err := other.Insert(ctxT(t), fsm.With(struct{}{}), &durable.InsertOpts{Queue: "later", EligibleAt: at.Add(-time.Second)}); err != nil {
				t.Fatal(err)
			}
			return at
		},
		"insert-all": func(t *testing.T, _ *testBundle, other *durable.Client, fsm *durable.FSM[struct{}]) time.Time {
			at := time.Now().Add(delay)
			if _, err := other.InsertAll(ctxT(t), []durable.InsertParams{
				{Args: fsm.With(struct{}{}), Opts: &durable.InsertOpts{Queue: "later", ScheduleIn: delay}},
				{Args: fsm.With(struct{}{}), Opts: &durable.InsertOpts{Queue: "later", ScheduleIn: 100 * delay}},
			}); err != nil {
				t.Fatal(err)
			}
			return at
		},
		"insert-tx": func(t *testing.T, b *testBundle, other *durable.Client, fsm *durable.FSM[struct{}]) time.Time {
			at := time.Now().Add(delay)
			tx, err := b.pool.Begin(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(context.Background())
			if _, err := other.InsertTx(ctxT(t), tx, fsm.With(struct{}{}), &durable.InsertOpts{Queue: "later", ScheduleIn: delay}); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(ctxT(t)); err != nil {
				t.Fatal(err)
			}
			return at
		},
		"client-retry-at": func(t *testing.T, b *testBundle, other *durable.Client, fsm *durable.FSM[struct{}]) time.Time {
			// A failed instance that never ran here: made so in the
			// database, for no claim of the queue to follow its end.
			id, err := other.Insert(ctxT(t), fsm.With(struct{}{}), &durable.InsertOpts{Queue: "later", ScheduleIn: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			b.exec(t, `UPDATE durable_instance SET status = 'failed', finished_at = now(), error = 'boom' WHERE id = $1`, id)
			at := time.Now().Add(delay)
			if _, err := other.Retry(ctxT(t), durable.ByID(id), &durable.RetryOpts{At: at}); err != nil {
				t.Fatal(err)
			}
			return at
		},
	}
	for name, schedule := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ran := make(chan time.Time, 4)
			fsm := mustFSM(t, durable.FSMConfig[struct{}]{
				Name: "elsewhere", Initial: "a",
				Steps: map[string]durable.StepFunc[struct{}]{
					"a": func(context.Context, *durable.Step[struct{}]) (durable.Outcome, error) {
						ran <- time.Now()
						return durable.Done(nil), nil
					},
				},
			})
			cfg := fast(fsm)
			// The row under test goes to queue "later", whose picker
			// claims only at the start and when woken.
			cfg.Queues = map[string]durable.QueueConfig{durable.DefaultQueue: {Concurrency: 1}, "later": {Concurrency: 1}}
			cfg.PollInterval = time.Minute // only a hint can start a row within the test
			b := setup(t, cfg)
			b.start(t)
			other, err := durable.NewClient(b.pool, nil)
			if err != nil {
				t.Fatal(err)
			}
			// Once both pickers have made their first claim, a row of the
			// default queue eligible at once runs only once the engine's
			// listener has LISTENed and poked every picker, that of
			// "later" too: the claims those pokes made are over long
			// before the row under test exists, and none learns of it.
			waitFor(t, "the first claim of each queue", func() bool {
				b.events.mu.Lock()
				defer b.events.mu.Unlock()
				seen := map[string]bool{}
				for _, p := range b.events.picks {
					seen[p.Queue] = true
				}
				return len(seen) == 2
			})
			if _, err := other.Insert(ctxT(t), fsm.With(struct{}{}), nil); err != nil {
				t.Fatal(err)
			}
			select {
			case <-ran:
			case <-time.After(15 * time.Second):
				t.Fatal("a row inserted by another client for now did not run within 15 s: the engine hears no hint")
			}

			eligible := schedule(t, b, other, fsm)
			select {
			case at := <-ran:
				// The test's clock is read after the database's: the
				// step may seem to start a little early.
				if late := at.Sub(eligible); late < -100*time.Millisecond || late > 5*time.Second {
					t.Fatalf("the step started %s after the row became eligible; want within 5 s", late)
				}
			case <-time.After(15 * time.Second):
				t.Fatal("the row another client scheduled did not start within 15 s of its eligible time: it waits for the engine's next poll (PollInterval 1 min)")
			}
		})
	}
}
