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
