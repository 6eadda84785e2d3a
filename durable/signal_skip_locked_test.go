package durable_test

import (
	"context"
	"testing"
	"time"

	"github.com/idemgo/idem/durable"
)

// A picker skips the rows other transactions hold locked (FOR UPDATE SKIP
// LOCKED), and a signal's transaction holds its target's row lock until
// it commits: a runnable instance signalled while the picker claims is
// skipped by that claim. The signal's commit wakes the pickers of the
// instance's queue, so that it runs then, not at the next poll.
func TestRunnableInstanceSkippedWhileSignalledRunsOnTheSignalsCommit(t *testing.T) {
	t.Parallel()
	type gateState struct{ Block bool }
	gate := make(chan struct{})
	closeAtCleanup(t, gate)
	f := mustFSM(t, durable.FSMConfig[gateState]{
		Name: "gate", Initial: "run",
		Steps: map[string]durable.StepFunc[gateState]{
			"run": func(ctx context.Context, s *durable.Step[gateState]) (durable.Outcome, error) {
				if s.State.Block {
					select {
					case <-gate:
					case <-ctx.Done():
						return durable.Outcome{}, ctx.Err()
					}
				}
				return durable.Done(nil), nil
			},
		},
	})
	cfg := fast(f)
	cfg.PollInterval = 5 * time.Second
	cfg.Queues = map[string]durable.QueueConfig{durable.DefaultQueue: {Concurrency: 1}}
	b := setup(t, cfg)
	b.start(t)
	ctx := ctxT(t)

	// The one worker is busy: the picker has no room and leaves x be.
	blocker := b.insert(t, f.With(gateState{Block: true}), nil)
	b.waitStatus(t, blocker, durable.StatusExecuting)
	x := b.insert(t, f.With(gateState{}), nil)

	// x is signalled, its row locked until tx commits, while the worker
	// frees up and the picker claims: the claim skips x.
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := b.client.SignalTx(ctx, tx, durable.ByID(x), "note", nil, ""); err != nil {
		t.Fatal(err)
	}
	picks := func() []durable.PickStopEvent {
		b.events.mu.Lock()
		defer b.events.mu.Unlock()
		return append([]durable.PickStopEvent(nil), b.events.picks...)
	}
	before := len(picks())
	close(gate)
	b.waitStatus(t, blocker, durable.StatusDone)
	waitFor(t, "a claim after the blocker's end that leased nothing", func() bool {
		p := picks()
		return len(p) > before && p[len(p)-1].Count == 0 && p[len(p)-1].Demand == 1
	})
	if in := b.get(t, x); in.Status != durable.StatusRunnable {
		t.Fatalf("x is %s, want runnable (skipped by the claim)", in.Status)
	}

	committed := time.Now()
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	b.waitStatus(t, x, durable.StatusDone)
	if took := time.Since(committed); took > cfg.PollInterval/2 {
		t.Fatalf("x ran %s after the signal's commit; want well within one PollInterval (%s)", took, cfg.PollInterval)
	}
}
