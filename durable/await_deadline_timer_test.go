package durable_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemgo/idem/durable"
)

// An AwaitTimeout deadline wakes its row when it passes, not at the
// engine's next look for deadlines (Config.PollInterval): the engine arms
// its one deadline timer for the earliest deadline it knows of, learnt
// from the statement that wakes the rows past theirs (a row parked before
// the engine started; the later of two rows once the earlier one fired)
// or from the Await outcomes it commits itself (the timer moved forward,
// never doubled). With an hourly poll, only that timer can fire them.
func TestAwaitDeadlineFiresWhenItPassesNotAtTheNextPoll(t *testing.T) {
	t.Parallel()
	const delay = 500 * time.Millisecond
	// timeouts are the AwaitTimeout of each row, by correlation key, in
	// the order they are inserted, each once the one before has parked.
	cases := map[string]struct {
		timeouts    []time.Duration
		parkedFirst bool // parked by another engine, stopped before this one starts
	}{
		"parked-here":             {timeouts: []time.Duration{delay}},
		"parked-before-start":     {timeouts: []time.Duration{3 * delay}, parkedFirst: true},
		"sooner-parked-after":     {timeouts: []time.Duration{6 * delay, delay}},
		"later-learnt-from-check": {timeouts: []time.Duration{delay, 4 * delay}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			type woken struct {
				id       int64
				at       time.Time
				timedOut bool
			}
			woke := make(chan woken, len(tc.timeouts))
			fsm := mustFSM(t, durable.FSMConfig[time.Duration]{
				Name: "deadline", Initial: "a",
				Steps: map[string]durable.StepFunc[time.Duration]{
					"a": func(_ context.Context, s *durable.Step[time.Duration]) (durable.Outcome, error) {
						return durable.AwaitTimeout("b", s.State, "never"), nil
					},
					"b": func(_ context.Context, s *durable.Step[time.Duration]) (durable.Outcome, error) {
						woke <- woken{s.ID, time.Now(), s.TimedOut}
						return durable.Done(nil), nil
					},
				},
			})
			cfg := fast(fsm)
			cfg.PollInterval, cfg.ReaperInterval = time.Hour, time.Hour
			cfg.PollOnly = true // no hint, no listener's poke: only the engine's timers
			b := setup(t, cfg)

			park := func(t *testing.T, timeout time.Duration) int64 {
				t.Helper()
				id := b.insert(t, fsm.With(timeout), nil)
				b.waitStatus(t, id, durable.StatusAwaitingSignal)
				return id
			}
			var ids []int64
			if tc.parkedFirst {
				other := *cfg
				other.ID = "parker"
				parker := newClient(t, newPool(t, b.url), &other, &recorder{})
				for _, timeout := range tc.timeouts {
					ids = append(ids, b.insert(t, fsm.With(timeout), nil))
				}
				if err := parker.Start(ctxT(t)); err != nil { // its first claim takes them
					t.Fatal(err)
				}
				for _, id := range ids {
					b.waitStatus(t, id, durable.StatusAwaitingSignal)
				}
				if err := parker.Stop(ctxT(t)); err != nil {
					t.Fatal(err)
				}
				b.start(t)
			} else {
				b.start(t)
				for _, timeout := range tc.timeouts {
					ids = append(ids, park(t, timeout))
				}
			}
			deadlines := map[int64]time.Time{}
			for _, id := range ids {
				in := b.get(t, id)
				if in.Status != durable.StatusAwaitingSignal || in.AwaitDeadline.IsZero() {
					t.Fatalf("instance %d is %s with deadline %v; want parked with a deadline", id, in.Status, in.AwaitDeadline)
				}
				deadlines[id] = in.AwaitDeadline
			}
			for range ids {
				select {
				case w := <-woke:
					if !w.timedOut {
						t.Errorf("instance %d woke with a signal; want timed out", w.id)
					}
					// The test's clock is read after the database's:
					// the step may seem to start a little early.
					if late := w.at.Sub(deadlines[w.id]); late < -100*time.Millisecond || late > 5*time.Second {
						t.Errorf("instance %d's step ran %s after its await deadline; want within 5 s", w.id, late)
					}
				case <-time.After(20 * time.Second):
					t.Fatal("a parked row was not woken within 20 s of its await deadline: it waits for the next look (PollInterval 1 h)")
				}
			}
		})
	}
}

// The await timer's statement finds the rows past their deadline, and the
// earliest deadline still to come, through the index of the deadlines,
// under a generic plan too: a scan of the instances would cost every
// engine a read of the table at every deadline and poll.
func TestAwaitTimerPlanUsesTheDeadlineIndex(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.exec(t, `INSERT INTO durable_instance (fsm, fsm_version, step, state, queue, correlation_scope, status, finished_at)
		SELECT 'f', 1, 'a', 'null', 'default', '{}', 'done', now() FROM generate_series(1, 20000)`)
	b.exec(t, `INSERT INTO durable_instance (fsm, fsm_version, step, state, queue, correlation_scope, status, awaiting, await_deadline)
		SELECT 'f', 1, 'a', 'null', 'default', '{}', 'awaiting_signal', '{s}', now() + k * interval '1 second'
		FROM generate_series(1, 200) k`)
	b.exec(t, `ANALYZE durable_instance`)

	ctx := ctxT(t)
	conn, err := b.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for _, q := range []string{
		`SET plan_cache_mode = force_generic_plan`,
		`PREPARE due(int) AS ` + durable.DueSQL,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	defer func() { _, _ = conn.Exec(ctx, `DEALLOCATE due; RESET plan_cache_mode`) }()
	rows, err := conn.Query(ctx, `EXPLAIN EXECUTE due(1000)`)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(plan, "\n")
	if strings.Contains(text, "Seq Scan on durable_instance") || strings.Count(text, "durable_instance_await_deadline_idx") < 2 {
		t.Fatalf("the await timer's statement does not read the deadlines through their index:\n%s", text)
	}
}
