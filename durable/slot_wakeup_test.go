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
// release and then ends, and a waiter FSM (heldWaiter) whose steps end
// once proceed is closed.
func keyedPair(t *testing.T, release, proceed chan struct{}) (holder, waiter *durable.FSM[struct{}]) {
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
	return holder, heldWaiter(t, proceed)
}

// heldWaiter returns the FSM "waiter", in queue "waiters", whose step
// holds its concurrency slot until proceed is closed, and then ends.
func heldWaiter(t *testing.T, proceed chan struct{}) *durable.FSM[struct{}] {
	t.Helper()
	return mustFSM(t, durable.FSMConfig[struct{}]{
		Name: "waiter", Initial: "a", Queue: "waiters",
		Steps: map[string]durable.StepFunc[struct{}]{
			"a": func(context.Context, *durable.Step[struct{}]) (durable.Outcome, error) {
				<-proceed
				return durable.Done(nil), nil
			},
		},
	})
}

// waitOnKey inserts two rows of waiter (heldWaiter) with the concurrency
// key "k", whose one slot a holder holds, and starts an engine serving
// their queue that polls hourly (idleEngine); it returns their ids once
// that engine's first pick has found the key full.
//
// The idle engine may pick once more at any moment, its listener's first
// poke coming late on a loaded machine: it may take the first waiter the
// moment a slot freed outside a commit is visible, before the engine that
// freed it looks up the rows of the key that wait (wakeFreed). The second
// waiter, barred by the first's slot, still waits then, and the waiters'
// steps hold that slot until proceed is closed, so that no waiter's commit
// sends a hint in the look-up's stead: a hint naming "waiters" comes from
// that look-up, however the idle engine's picks fall.
func waitOnKey(t *testing.T, b *testBundle, cfg *durable.Config, waiter *durable.FSM[struct{}], proceed chan struct{}) []int64 {
	t.Helper()
	ids := []int64{
		b.insert(t, waiter.With(struct{}{}), &durable.InsertOpts{ConcurrencyKey: "k"}),
		b.insert(t, waiter.With(struct{}{}), &durable.InsertOpts{ConcurrencyKey: "k"}),
	}
	idleEngine(t, b, cfg, "waiters")
	closeAtCleanup(t, proceed) // before the idle engine's Stop
	for _, id := range ids {
		if in := b.get(t, id); in.Status != durable.StatusRunnable {
			t.Fatalf("waiter %d is %s while the holder holds the slot; want runnable", id, in.Status)
		}
	}
	return ids
}

// waitersDone lets the waiters' steps end and waits until both are done:
// each one's end frees the slot for the other.
func waitersDone(t *testing.T, b *testBundle, ids []int64, proceed chan struct{}) {
	t.Helper()
	close(proceed)
	for _, id := range ids {
		b.waitStatus(t, id, durable.StatusDone)
	}
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
			release, proceed := make(chan struct{}), make(chan struct{})
			closeAtCleanup(t, release)
			holder, waiter := keyedPair(t, release, proceed)
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
			waiterIDs := waitOnKey(t, b, cfg, waiter, proceed)
			hints := listenForHints(t, b)
			if how == "cancelled-step-returns" {
				close(release)
			} else {
				startClient(t, b.client) // its reaper frees the slot
			}
			hints.wait(t, "waiters", "the slot freed")
			waitersDone(t, b, waiterIDs, proceed)
			if want := map[string]durable.Status{"reaped": durable.StatusRunnable, "failed-reaped": durable.StatusFailed}[how]; want != "" {
				if in := b.get(t, holderID); in.Status != want {
					t.Fatalf("the holder is %s, want %s", in.Status, want)
				}
			}
		})
	}
}
