package durable_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgo/idem/durable"
)

// deadClaim leases instance id as an engine named owner would, with a
// lease that has already expired: an engine that claimed the row and died.
func (b *testBundle) deadClaim(t *testing.T, id int64, owner string) {
	t.Helper()
	b.exec(t, `UPDATE durable_instance SET status = 'executing', lease_owner = $2,
		lease_expires_at = now() - interval '1 millisecond', claims = claims + 1
		WHERE id = $1 AND status = 'runnable'`, id, owner)
}

// reapedEngine is an engine whose reaper looks often, and which serves
// only the default queue: rows of the queue "elsewhere" are left to the
// test's dead claims.
func reapedEngine(maxReaps int, fsms ...durable.Definition) *durable.Config {
	cfg := fast(fsms...)
	cfg.ReaperInterval, cfg.HeartbeatInterval, cfg.MaxReaps = 10*time.Millisecond, time.Second, maxReaps
	return cfg
}

var elsewhere = &durable.InsertOpts{Queue: "elsewhere"}

// An instance whose lease expires MaxReaps times in a row fails with
// ErrReapedTooOften; an outcome committed between reaps starts the count
// over, and Retry clears it.
func TestReaperFailsInstanceReapedTooOften(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	b := setup(t, reapedEngine(3, ctl))
	b.start(t)
	id := b.insert(t, ctl.With(ctlState{}), elsewhere)
	b.signal(t, durable.ByID(id), "go", 1, "") // in the inbox when it fails

	reap := func(owner string, want durable.Status) *durable.Instance {
		t.Helper()
		b.deadClaim(t, id, owner)
		return b.waitStatus(t, id, want)
	}
	reap("dead-1", durable.StatusRunnable)
	reap("dead-2", durable.StatusRunnable)
	// A claim that commits an outcome (here, as the engine's Retry would)
	// breaks the run of reaps.
	b.exec(t, `UPDATE durable_instance SET claims = claims + 1 WHERE id = $1`, id)
	b.exec(t, `UPDATE durable_instance SET attempt = attempt + 1 WHERE id = $1`, id)
	reap("dead-3", durable.StatusRunnable)
	in := reap("dead-4", durable.StatusRunnable)
	if in.Attempt != 6 || !strings.Contains(in.Error, "dead-4") {
		t.Fatalf("after four reaps and a retry: attempt %d, error %q", in.Attempt, in.Error)
	}

	in = reap("dead-5", durable.StatusFailed)
	if !strings.HasPrefix(in.Error, durable.ErrReapedTooOften.Error()) ||
		!strings.Contains(in.Error, "expired 3 times in a row") || !strings.Contains(in.Error, "dead-5") {
		t.Fatalf("error %q, want it to say the lease expired 3 times in a row", in.Error)
	}
	if in.FinishedAt.IsZero() || in.LeaseOwner != "" || len(in.Inbox) != 0 || in.Step != "start" {
		t.Fatalf("failed instance: finished %v, lease %q, inbox %v, step %s", in.FinishedAt, in.LeaseOwner, in.Inbox, in.Step)
	}
	b.noStuckRows(t)

	// Retried, it may be reaped again before it fails again.
	if _, err := b.client.Retry(ctxT(t), durable.ByID(id), nil); err != nil {
		t.Fatal(err)
	}
	reap("dead-6", durable.StatusRunnable)
	reap("dead-7", durable.StatusRunnable)
	reap("dead-8", durable.StatusFailed)
}

// reapedParent starts a reapedEngine with maxReaps and inserts a parent
// that awaits one child, of ctlFSM on the queue "elsewhere": it returns
// the bundle, ctlFSM, the parent's and the child's ids, and the runs of
// the parent's next step.
func reapedParent(t *testing.T, maxReaps int) (b *testBundle, ctl *durable.FSM[ctlState], p, kid int64, after *atomic.Int32) {
	t.Helper()
	ctl = ctlFSM(t)
	after = new(atomic.Int32)
	parent := parentFSM(t, func() []durable.InsertParams {
		return []durable.InsertParams{{Args: ctl.With(ctlState{}), Opts: elsewhere}}
	}, after)
	b = setup(t, reapedEngine(maxReaps, ctl, parent))
	b.start(t)
	p = b.insert(t, parent.With(parentState{}), nil)
	b.waitStatus(t, p, durable.StatusAwaitingChildren)
	return b, ctl, p, b.childIDs(t, p)[0], after
}

// A child failed by the reaper releases its waiting parent, which then
// runs on.
func TestReaperFailingAChildReleasesItsParent(t *testing.T) {
	t.Parallel()
	b, _, p, kid, after := reapedParent(t, 2)

	b.deadClaim(t, kid, "dead-1")
	b.waitStatus(t, kid, durable.StatusRunnable)
	b.deadClaim(t, kid, "dead-2")
	if in := b.waitStatus(t, kid, durable.StatusFailed); !strings.HasPrefix(in.Error, durable.ErrReapedTooOften.Error()) {
		t.Fatalf("child's error %q", in.Error)
	}
	b.waitStatus(t, p, durable.StatusDone)
	if n := after.Load(); n != 1 {
		t.Fatalf("the parent's next step ran %d times, want 1", n)
	}
	if n := b.pending(t, p); n != 0 {
		t.Fatalf("pending %d, want 0", n)
	}
}

// A negative MaxReaps sets no limit.
func TestReaperWithoutMaxReaps(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	b := setup(t, reapedEngine(-1, ctl))
	b.start(t)
	id := b.insert(t, ctl.With(ctlState{}), elsewhere)
	for range durable.DefaultMaxReaps + 2 {
		b.deadClaim(t, id, "dead")
		b.waitStatus(t, id, durable.StatusRunnable)
	}
	if in := b.get(t, id); in.Attempt != durable.DefaultMaxReaps+3 {
		t.Fatalf("attempt %d, want %d", in.Attempt, durable.DefaultMaxReaps+3)
	}
}

// The reaper skips an instance to fail whose row, or whose parent's, a
// caller's transaction has locked, rather than wait for the lock: the
// other instances it fails in the same pass are not held up, and the
// skipped ones fail once the locks are released.
func TestReaperFailingSkipsLockedRows(t *testing.T) {
	t.Parallel()
	b, ctl, p, kid, _ := reapedParent(t, 1)
	locked := b.insert(t, ctl.With(ctlState{}), elsewhere)
	free := b.insert(t, ctl.With(ctlState{}), elsewhere)

	// Leases that expire shortly, in this order, once the caller's
	// transaction holds the locks of locked and of kid's parent.
	for i, id := range []int64{locked, kid, free} {
		b.exec(t, `UPDATE durable_instance SET status = 'executing', lease_owner = 'dead',
			lease_expires_at = now() + $2 * interval '1 millisecond', claims = claims + 1
			WHERE id = $1 AND status = 'runnable'`, id, 300+10*i)
	}
	tx, _ := beginTx(t, b)
	for _, id := range []int64{locked, p} {
		if err := b.client.SignalTx(ctxT(t), tx, durable.ByID(id), "go", 1, ""); err != nil {
			t.Fatalf("SignalTx(%d): %v", id, err)
		}
	}
	start := time.Now()
	b.waitStatus(t, free, durable.StatusFailed)
	if d := time.Since(start); d > 3*time.Second { // LeaseTTL is 10 s
		t.Fatalf("the free instance failed after %v: the reaper waited for the locked rows", d)
	}
	if s := b.get(t, locked).Status; s != durable.StatusExecuting {
		t.Fatalf("locked instance %s while its lock is held", s)
	}
	if err := tx.Rollback(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	b.waitStatus(t, locked, durable.StatusFailed)
	b.waitStatus(t, kid, durable.StatusFailed)
	b.waitStatus(t, p, durable.StatusDone)
}

// A child to fail whose parent's row is gone is failed all the same, as a
// step's end would end it: a missing parent is not taken for a locked one.
func TestReaperFailsAChildWhoseParentIsGone(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	b := setup(t, reapedEngine(1, ctl))
	b.start(t)
	kid := b.insert(t, ctl.With(ctlState{}), elsewhere)
	b.exec(t, `UPDATE durable_instance SET parent_id = $1 + 1000, releases_parent = true WHERE id = $1`, kid)
	b.deadClaim(t, kid, "dead")
	b.waitStatus(t, kid, durable.StatusFailed)
}
