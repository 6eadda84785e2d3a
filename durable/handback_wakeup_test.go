package durable_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgo/idem/durable"
)

// A claim its engine hands back frees its concurrency key's slot and wakes
// the engines serving the queues in which rows of that key wait, as a
// step's end does: a claim still buffered when the engine stops (drain),
// and a step interrupted by the engine's hard stop that then fails. The
// rows waiting on the key, in a queue that only an engine polling hourly
// serves, run at once (see waitOnKey).
func TestHandedBackClaimWakesTheEnginesWhereItsKeyWaits(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"drain", "hard-stop"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			release := make(chan struct{})
			closeAtCleanup(t, release)
			holder := mustFSM(t, durable.FSMConfig[struct{}]{
				Name: "holder", Initial: "a", Queue: "holders",
				Steps: map[string]durable.StepFunc[struct{}]{
					"a": func(ctx context.Context, _ *durable.Step[struct{}]) (durable.Outcome, error) {
						select {
						case <-release:
							return durable.Done(nil), nil
						case <-ctx.Done():
							return durable.Outcome{}, ctx.Err()
						}
					},
				},
			})
			proceed := make(chan struct{})
			waiter := heldWaiter(t, proceed)
			cfg := fast(holder, waiter)
			// One worker and one buffered claim: with "drain", a row with
			// no key runs and the keyed one waits in the buffer.
			cfg.Queues = map[string]durable.QueueConfig{"holders": {Concurrency: 1, Prefetch: 1}}
			b := setup(t, cfg)
			if how == "drain" {
				b.insert(t, holder.With(struct{}{}), &durable.InsertOpts{CorrelationKey: "runs"})
			}
			keyed := b.insert(t, holder.With(struct{}{}), &durable.InsertOpts{CorrelationKey: "keyed", ConcurrencyKey: "k"})
			startClient(t, b.client)
			b.waitStatus(t, keyed, durable.StatusExecuting) // claimed: buffered, or running
			waiterIDs := waitOnKey(t, b, cfg, waiter, proceed)
			hints := listenForHints(t, b)
			stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			if how == "hard-stop" {
				cancel() // the running step's context is cancelled at once
			}
			defer cancel()
			stopped := make(chan error, 1)
			go func() { stopped <- b.client.Stop(stopCtx) }()
			hints.wait(t, "waiters", "the slot the handed-back claim freed")
			waitersDone(t, b, waiterIDs, proceed)
			close(release) // with "drain", the running step returns: Stop ends
			if err := <-stopped; how == "drain" && err != nil {
				t.Fatalf("Stop: %v", err)
			}
			if in := b.get(t, keyed); in.Status != durable.StatusRunnable || in.Attempt != 1 {
				t.Fatalf("the keyed holder is %s at attempt %d; want handed back: runnable at attempt 1", in.Status, in.Attempt)
			}
		})
	}
}

// A claim whose lease lapsed while it waited in the buffer (no heartbeat
// could extend it), and which its engine therefore hands back instead of
// running it, frees its concurrency key's slot and wakes the engines
// serving the queues in which rows of that key wait, as a step's end
// does. The rows waiting on the key are in a queue that only an engine
// polling hourly serves (see waitOnKey); the handed-back row, claimed again, holds its
// step until the test lets it go, so that no commit sends the hint in its
// stead.
func TestClaimHandedBackAfterItsLeaseLapsedWakesTheEnginesWhereItsKeyWaits(t *testing.T) {
	t.Parallel()
	started, release, done := make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
	var firstRuns atomic.Int32
	holder := mustFSM(t, durable.FSMConfig[string]{
		Name: "holder", Initial: "a", Queue: "holders",
		Steps: map[string]durable.StepFunc[string]{
			"a": func(ctx context.Context, s *durable.Step[string]) (durable.Outcome, error) {
				if s.State == "first" {
					return holdFirstRun(ctx, &firstRuns, started, done) // holds the worker until its lease lapses
				}
				<-release // its lease lapsing or not
				return durable.Done(nil), nil
			},
		},
	})
	proceed := make(chan struct{})
	waiter := heldWaiter(t, proceed)
	b := setup(t, nil)
	first := b.insert(t, holder.With("first"), nil)
	keyed := b.insert(t, holder.With("keyed"), &durable.InsertOpts{ConcurrencyKey: "k"})

	// One worker, and room to claim the keyed instance ahead, in the same
	// statement as the first.
	cfg := fast(holder, waiter)
	cfg.Queues = map[string]durable.QueueConfig{"holders": {Concurrency: 1, Prefetch: 1}}
	cfg.LeaseTTL, cfg.HeartbeatInterval, cfg.ReaperInterval = 2*time.Second, 500*time.Millisecond, time.Hour
	hang := newHeartbeatHang()
	startClient(t, newClient(t, hangingPool(t, b.url, hang), cfg, &recorder{}))
	t.Cleanup(hang.lift)
	closeAtCleanup(t, release)
	closeAtCleanup(t, done)
	<-started
	b.waitStatus(t, keyed, durable.StatusExecuting) // buffered
	waiterIDs := waitOnKey(t, b, cfg, waiter, proceed)
	hints := listenForHints(t, b)
	hang.on.Store(true) // the buffered claim's lease lapses within LeaseTTL

	hints.wait(t, "waiters", "the slot freed by the claim handed back once its lease lapsed in the buffer")
	hang.lift()
	close(release)
	waitersDone(t, b, waiterIDs, proceed)
	if in := b.waitStatus(t, keyed, durable.StatusDone); in.Attempt != 1 {
		t.Errorf("the keyed instance is done at attempt %d; want 1: its lapsed claim handed back, not reaped", in.Attempt)
	}
	b.waitStatus(t, first, durable.StatusDone)
}
