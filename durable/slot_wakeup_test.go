package durable_test

import (
	"context"
	"testing"
	"time"

	"github.com/idemgo/idem/durable"
)

// A step that frees its concurrency key's slot wakes the engines serving
// the queues in which rows of that key wait, not only its own engine's
// picker of its own queue: the row waiting on the key, in a queue that
// only an engine polling hourly serves, runs at once, whatever outcome
// freed the slot.
func TestFreedSlotWakesTheEnginesWhereItsKeyWaits(t *testing.T) {
	t.Parallel()
	outcomes := map[string]durable.Outcome{
		"next":        durable.Next("b"),
		"children":    durable.Children("b"),
		"done":        durable.Done(nil),
		"stop":        durable.Stop("enough"),
		"await":       durable.Await("b", "never"),
		"retry-later": durable.Retry(time.Hour),
	}
	for name, outcome := range outcomes {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			release := make(chan struct{})
			closeAtCleanup(t, release)
			holder := mustFSM(t, durable.FSMConfig[struct{}]{
				Name: "holder", Initial: "a", Queue: "holders",
				Steps: map[string]durable.StepFunc[struct{}]{
					"a": func(context.Context, *durable.Step[struct{}]) (durable.Outcome, error) {
						<-release
						return outcome, nil
					},
					"b": func(context.Context, *durable.Step[struct{}]) (durable.Outcome, error) { return durable.Done(nil), nil },
				},
			})
			waiter := mustFSM(t, durable.FSMConfig[struct{}]{
				Name: "waiter", Initial: "a", Queue: "waiters",
				Steps: map[string]durable.StepFunc[struct{}]{
					"a": func(context.Context, *durable.Step[struct{}]) (durable.Outcome, error) { return durable.Done(nil), nil },
				},
			})
			cfg := fast(holder, waiter)
			cfg.Queues = map[string]durable.QueueConfig{"holders": {Concurrency: 1}}
			b := setup(t, cfg)
			holderID := b.insert(t, holder.With(struct{}{}), &durable.InsertOpts{ConcurrencyKey: "k"})
			startClient(t, b.client)
			b.waitStatus(t, holderID, durable.StatusExecuting)
			waiterID := b.insert(t, waiter.With(struct{}{}), &durable.InsertOpts{ConcurrencyKey: "k"})
			// The engine serving the waiters' queue finds the key full at
			// its first pick, and polls hourly after that.
			idleEngine(t, b, cfg, "waiters")
			if in := b.get(t, waiterID); in.Status != durable.StatusRunnable {
				t.Fatalf("the waiter is %s while the holder runs; want runnable", in.Status)
			}
			// Its listener may poke it once more: the hint is heard here.
			hints := listenForHints(t, b)
			close(release)
			hints.wait(t, "waiters", "the slot the holder freed")
			b.waitStatus(t, waiterID, durable.StatusDone)
		})
	}
}

// keyedPair returns a holder FSM in queue "holders", whose step blocks on
// release and then ends, and a waiter FSM in queue "waiters", whose step
// ends at once.
func keyedPair(t *testing.T, release chan struct{}) (holder, waiter *durable.FSM[struct{}]) {
	t.Helper()
	holder = mustFSM(t, durable.FSMConfig[struct{}]{
		Name: "holder", Initial: "a", Queue: "holders",
		Steps: map[string]durable.StepFunc[struct{}]{
			"a": func(context.Context, *durable.Step[struct{}]) (durable.Outcome, error) {
				<-release
				return durable.Done(nil), nil
			},
		},
	})
	waiter = mustFSM(t, durable.FSMConfig[struct{}]{
		Name: "waiter", Initial: "a", Queue: "waiters",
		Steps: map[string]durable.StepFunc[struct{}]{
			"a": func(context.Context, *durable.Step[struct{}]) (durable.Outcome, error) { return durable.Done(nil), nil },
		},
	})
	return holder, waiter
}

// A slot freed behind a step's back wakes the engines serving the queues
// in which rows of its key wait, as a step's end does: the slot a
// cancelled row keeps until its step returns (freed then by its engine),
// and the slots the reaper frees, of a cancelled row or of an executing
// one, whose engine died, whether it returns the row to runnable or fails
// it (Config.MaxReaps).
func TestSlotFreedOutsideACommitWakesTheEnginesWhereItsKeyWaits(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"cancelled-step-returns", "reaped-cancelled", "reaped", "failed-reaped"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			release := make(chan struct{})
			closeAtCleanup(t, release)
			holder, waiter := keyedPair(t, release)
			cfg := fast(holder, waiter)
			cfg.ReaperInterval = 20 * time.Millisecond
			cfg.Queues = map[string]durable.QueueConfig{"holders": {Concurrency: 1}}
			b := setup(t, cfg)
			var holderID int64
			if how == "cancelled-step-returns" {
				holderID = b.insert(t, holder.With(struct{}{}), &durable.InsertOpts{ConcurrencyKey: "k"})
				startClient(t, b.client)
				b.waitStatus(t, holderID, durable.StatusExecuting)
				if err := b.client.Cancel(ctxT(t), durable.ByID(holderID), "enough"); err != nil {
					t.Fatal(err)
				}
			} else {
				// A row whose engine died holds the key's slot; its lease
				// has run out. The engine that reaps it serves another
				// queue: a reaped holder runnable again is not run, and
				// only the reaper can send the hint.
				cfg.Queues = map[string]durable.QueueConfig{"elsewhere": {Concurrency: 1}}
				if how == "failed-reaped" {
					cfg.MaxReaps = 1 // its first reap fails it
				}
				b.client = newClient(t, b.pool, cfg, b.events)
				status := map[string]string{"reaped-cancelled": "cancelled", "reaped": "executing", "failed-reaped": "executing"}[how]
				holderID = b.insert(t, holder.With(struct{}{}), &durable.InsertOpts{ConcurrencyKey: "k", ScheduleIn: time.Hour})
				b.exec(t, `UPDATE durable_instance SET status = $2, lease_owner = 'dead',
					lease_expires_at = now() - interval '1 second', claims = claims + 1 WHERE id = $1`, holderID, status)
			}
			waiterID := b.insert(t, waiter.With(struct{}{}), &durable.InsertOpts{ConcurrencyKey: "k"})
			idleEngine(t, b, cfg, "waiters")
			if in := b.get(t, waiterID); in.Status != durable.StatusRunnable {
				t.Fatalf("the waiter is %s while the holder holds the slot; want runnable", in.Status)
			}
			hints := listenForHints(t, b)
			if how == "cancelled-step-returns" {
				close(release)
			} else {
				startClient(t, b.client) // its reaper frees the slot
			}
			hints.wait(t, "waiters", "the slot freed")
			b.waitStatus(t, waiterID, durable.StatusDone)
			if want := map[string]durable.Status{"reaped": durable.StatusRunnable, "failed-reaped": durable.StatusFailed}[how]; want != "" {
				if in := b.get(t, holderID); in.Status != want {
					t.Fatalf("the holder is %s, want %s", in.Status, want)
				}
			}
		})
	}
}
