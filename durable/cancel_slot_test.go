package durable_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgo/idem/durable"
)

// stubbornFSM runs one step that counts itself in o under the state's key
// and returns only when release is closed, whatever its context says: a
// step slow to notice that its instance was cancelled. The first step to
// run sends its instance's id on entered.
func stubbornFSM(t testing.TB, o *overlaps, entered chan<- int64, release <-chan struct{}) *durable.FSM[ckState] {
	var first atomic.Bool
	return mustFSM(t, durable.FSMConfig[ckState]{
		Name:    "stubborn",
		Initial: "run",
		Steps: map[string]durable.StepFunc[ckState]{
			"run": func(ctx context.Context, s *durable.Step[ckState]) (durable.Outcome, error) {
				o.enter(s.State.Key)
				defer o.leave(s.State.Key)
				if first.CompareAndSwap(false, true) {
					entered <- s.ID
				}
				<-release
				return durable.Done(nil), nil
			},
		},
	})
}

// cancelWhileRunning starts an engine on the stubborn FSM, with tune
// changing its config, inserts two instances of concurrency key "k" and
// cancels the first ("no longer wanted") while its step runs. Closing
// release lets that step return.
func cancelWhileRunning(t *testing.T, tune func(*durable.Config)) (b *testBundle, o *overlaps, release chan struct{}, first, next int64) {
	t.Helper()
	o = newOverlaps()
	entered := make(chan int64, 1)
	release = make(chan struct{})
	fsm := stubbornFSM(t, o, entered, release)
	cfg := fast(fsm)
	cfg.HeartbeatInterval = 20 * time.Millisecond // the engine learns of the cancel at once
	tune(cfg)
	b = setup(t, cfg)
	b.start(t)
	closeAtCleanup(t, release)

	first = b.insert(t, fsm.With(ckState{Key: "k"}), &durable.InsertOpts{ConcurrencyKey: "k"})
	<-entered
	next = b.insert(t, fsm.With(ckState{Key: "k"}), &durable.InsertOpts{ConcurrencyKey: "k"})
	if err := b.client.Cancel(ctxT(t), durable.ByID(first), "no longer wanted"); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	return b, o, release, first, next
}

// Cancelling an instance whose step runs does not free its concurrency
// slot before the step ends: the next instance of the key waits for the
// cancelled step to return, so the key's limit holds.
func TestCancelKeepsTheConcurrencySlotUntilTheStepEnds(t *testing.T) {
	t.Parallel()
	b, o, release, first, next := cancelWhileRunning(t, func(*durable.Config) {})
	// Many polls and heartbeats later, the cancelled step still runs, and
	// the next instance of the key still waits.
	time.Sleep(500 * time.Millisecond)
	if m, _ := o.get("k"); m != 1 {
		t.Fatalf("%d steps of key k ran at once while the cancelled one had not returned, want 1", m)
	}
	if in := b.get(t, next); in.Status != durable.StatusRunnable {
		t.Fatalf("the next instance of the key is %s before the cancelled step returned, want runnable", in.Status)
	}
	if in := b.get(t, first); in.Status != durable.StatusCancelled || in.Error != "no longer wanted" {
		t.Fatalf("the cancelled instance: status %s, error %q", in.Status, in.Error)
	}

	// The cancelled step returns: its commit is fenced off, the slot is
	// freed, and the next instance runs.
	close(release)
	b.waitStatus(t, next, durable.StatusDone)
	if m, done := o.get("k"); m != 1 || done != 2 {
		t.Fatalf("key k: %d steps at once, %d done; want 1 and 2", m, done)
	}
	if in := b.get(t, first); in.Status != durable.StatusCancelled || in.LeaseOwner != "" {
		t.Fatalf("the cancelled instance after its step: status %s, lease %q", in.Status, in.LeaseOwner)
	}
	b.noStuckRows(t)
}

// A cancelled step that never returns holds its key's slot only as long
// as its lease, which the engine no longer extends: once it expires the
// reaper frees the slot, as it does for a step that hangs.
func TestCancelledStepThatHangsFreesTheSlotWhenItsLeaseExpires(t *testing.T) {
	t.Parallel()
	o := newOverlaps()
	entered, release := make(chan int64, 1), make(chan struct{})
	fsm := stubbornFSM(t, o, entered, release)
	cfg := fast(fsm)
	// A lease of 40 heartbeats, which a loaded machine delaying a few does
	// not let lapse before the Cancel.
	cfg.LeaseTTL, cfg.HeartbeatInterval, cfg.ReaperInterval = 2*time.Second, 50*time.Millisecond, 50*time.Millisecond
	b := setup(t, cfg)
	b.start(t)
	t.Cleanup(func() { close(release) }) // before Stop, which waits for the step

	first := b.insert(t, fsm.With(ckState{Key: "k"}), &durable.InsertOpts{ConcurrencyKey: "k"})
	<-entered
	next := b.insert(t, fsm.With(ckState{Key: "next"}), &durable.InsertOpts{ConcurrencyKey: "k"})
	// The lease left to the running step, at least: a heartbeat may still
	// extend it before the Cancel, none after. Leases are in the
	// database's time; what is left of one is the same in ours.
	cancelled := time.Now()
	var left float64
	if err := b.pool.QueryRow(ctxT(t), `SELECT extract(epoch FROM lease_expires_at - now())
		FROM durable_instance WHERE id = $1`, first).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left <= 0 {
		t.Fatalf("the running step's lease lapsed %.3f s before the Cancel, in spite of heartbeats every %v", -left, cfg.HeartbeatInterval)
	}
	if err := b.client.Cancel(ctxT(t), durable.ByID(first), ""); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	waitFor(t, "the next instance of the key to run", func() bool {
		m, _ := o.get("next")
		return m > 0
	})
	if waited, lease := time.Since(cancelled), time.Duration(left*float64(time.Second)); waited < lease {
		t.Fatalf("the next instance ran %v after the cancel, before the cancelled step's lease (%v left) expired", waited, lease)
	}
	if in := b.get(t, first); in.Status != durable.StatusCancelled || in.LeaseOwner != "" || in.Attempt != 1 {
		t.Fatalf("the cancelled instance: status %s, lease %q, attempt %d", in.Status, in.LeaseOwner, in.Attempt)
	}
	if in := b.get(t, next); in.Status != durable.StatusExecuting {
		t.Fatalf("the next instance is %s, want executing", in.Status)
	}
}

// Garbage collection keeps a cancelled instance whose step still runs,
// however short GCRetention is: its row holds its key's slot until the
// step returns, and deleting it would let the next instance of the key run
// beside the cancelled step. Once the step has returned, the row is
// collected.
func TestGCKeepsACancelledInstanceWhoseStepRuns(t *testing.T) {
	t.Parallel()
	b, o, release, first, next := cancelWhileRunning(t, func(cfg *durable.Config) {
		cfg.GCRetention, cfg.GCInterval = time.Millisecond, 10*time.Millisecond
	})
	// Dozens of collections later, the cancelled step still runs, its row
	// is still there, and the next instance of the key still waits.
	time.Sleep(500 * time.Millisecond)
	if m, _ := o.get("k"); m != 1 {
		t.Fatalf("%d steps of key k ran at once while the cancelled one had not returned, want 1", m)
	}
	if n := b.count(t, "SELECT count(*) FROM durable_instance WHERE id = $1", first); n != 1 {
		t.Fatal("the cancelled instance was collected while its step ran")
	}
	if in := b.get(t, next); in.Status != durable.StatusRunnable {
		t.Fatalf("the next instance of the key is %s before the cancelled step returned, want runnable", in.Status)
	}

	// The next instance runs once the cancelled step has returned; both
	// rows are then collected (the next one as soon as it is done).
	close(release)
	waitFor(t, "both instances to be collected", func() bool {
		return b.count(t, "SELECT count(*) FROM durable_instance WHERE id IN ($1, $2)", first, next) == 0
	})
	if m, done := o.get("k"); m != 1 || done != 2 {
		t.Fatalf("key k: %d steps at once, %d done; want 1 and 2", m, done)
	}
}
