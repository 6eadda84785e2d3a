package durable_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgo/idem/durable"
)

// A child's end takes its parent's row lock, to count itself off the
// parent in the same transaction. While a caller's transaction holds that
// lock (SignalTx to the parent, not yet committed), the child's commit
// waits for it, for longer than a lease and past the child's StepTimeout
// (its step has returned): the engine keeps the child's lease all the
// while, so that the child is neither reaped nor run again, and the commit
// goes through once the caller's transaction ends.
func TestChildEndWaitsForParentLockedByCallerKeepingItsLease(t *testing.T) {
	t.Parallel()
	// A lease of 40 heartbeats: on a loaded machine (make test runs
	// packages side by side) one may come late by a second or more, which
	// must not let the waiting child's lease lapse.
	const ttl = 2 * time.Second
	var runs atomic.Int32
	entered, release := make(chan int64, 1), make(chan struct{})
	child := mustFSM(t, durable.FSMConfig[struct{}]{
		Name: "child", Initial: "run", StepTimeout: ttl,
		Steps: map[string]durable.StepFunc[struct{}]{
			"run": func(ctx context.Context, s *durable.Step[struct{}]) (durable.Outcome, error) {
				if runs.Add(1) == 1 {
					entered <- s.ID
				}
				<-release
				return durable.Done("child"), nil
			},
		},
	})
	parent := mustFSM(t, durable.FSMConfig[struct{}]{
		Name: "parent", Initial: "spawn",
		Steps: map[string]durable.StepFunc[struct{}]{
			"spawn": func(context.Context, *durable.Step[struct{}]) (durable.Outcome, error) {
				return durable.Children("after", durable.InsertParams{Args: child.With(struct{}{})}), nil
			},
			"after": func(context.Context, *durable.Step[struct{}]) (durable.Outcome, error) {
				return durable.Done("parent"), nil
			},
		},
	})
	cfg := fast(parent, child)
	cfg.LeaseTTL, cfg.HeartbeatInterval, cfg.ReaperInterval = ttl, 50*time.Millisecond, 50*time.Millisecond
	b := setup(t, cfg)
	b.start(t)
	closeAtCleanup(t, release)

	pid := b.insert(t, parent.With(struct{}{}), nil)
	cid := <-entered
	b.waitStatus(t, pid, durable.StatusAwaitingChildren)

	// A caller holds the parent's row lock in an open transaction.
	ctx := ctxT(t)
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := b.client.SignalTx(ctx, tx, durable.ByID(pid), "note", nil, ""); err != nil {
		t.Fatalf("SignalTx: %v", err)
	}

	// The child's step returns; its commit waits for the parent's lock,
	// for more than two leases: until a heartbeat that came two leases
	// after the step returned has extended the child's lease (leases are
	// in the database's time). A commit that gave up, or a claim that was
	// dropped or taken for lost, gets no more heartbeats.
	var returned time.Time
	if err := b.pool.QueryRow(ctx, "SELECT now()").Scan(&returned); err != nil {
		t.Fatal(err)
	}
	close(release)
	waitFor(t, "the waiting child's lease to be extended two leases after its step returned", func() bool {
		return b.get(t, cid).LeaseExpiresAt.After(returned.Add(3 * ttl))
	})
	if n := runs.Load(); n != 1 {
		t.Fatalf("the child's step ran %d times while its commit waited, want 1", n)
	}
	if n := b.count(t, `SELECT count(*) FROM durable_instance
		WHERE id = $1 AND status = 'executing' AND attempt = 1 AND lease_expires_at > now()`, cid); n != 1 {
		in := b.get(t, cid)
		t.Fatalf("the waiting child: status %s, attempt %d, lease %q until %v; want executing at attempt 1 under a live lease",
			in.Status, in.Attempt, in.LeaseOwner, in.LeaseExpiresAt)
	}

	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("commit of the caller's transaction: %v", err)
	}
	if in := b.waitStatus(t, pid, durable.StatusDone); string(in.Result) != `"parent"` {
		t.Fatalf("parent result %s", in.Result)
	}
	if in := b.get(t, cid); in.Status != durable.StatusDone || in.Attempt != 1 {
		t.Fatalf("child: status %s, attempt %d; want done at attempt 1", in.Status, in.Attempt)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("the child's step ran %d times, want 1", n)
	}
	events := slices.DeleteFunc(b.events.stepEvents(), func(e durable.StepStopEvent) bool { return e.ID != cid })
	if len(events) != 1 || events[0].Fenced || events[0].CommitErr != nil || events[0].Kind != durable.KindDone {
		t.Fatalf("the child's step events %+v, want one committed done", events)
	}
	b.events.mu.Lock()
	defer b.events.mu.Unlock()
	for _, e := range b.events.reaped {
		if slices.Contains(e.IDs, cid) {
			t.Fatalf("the waiting child was reaped: %+v", e)
		}
	}
}
