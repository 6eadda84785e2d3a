package durable_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemgo/idem/durable"
)

// byKeyOps are the calls that address an instance by key and lock it.
var byKeyOps = []struct {
	name string
	call func(ctx context.Context, c *durable.Client, tx pgx.Tx, key string) error
}{
	{"SignalTx", func(ctx context.Context, c *durable.Client, tx pgx.Tx, key string) error {
		return c.SignalTx(ctx, tx, durable.ByKey(key), "go", nil, "")
	}},
	{"CancelTx", func(ctx context.Context, c *durable.Client, tx pgx.Tx, key string) error {
		return c.CancelTx(ctx, tx, durable.ByKey(key), "by key")
	}},
}

// lockInTx begins a transaction that holds the row lock of instance id
// (a signal to it, not yet committed) and rolls it back when t ends.
func lockInTx(t *testing.T, b *testBundle, id int64) pgx.Tx {
	t.Helper()
	tx, err := b.pool.Begin(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	if err := b.client.SignalTx(ctxT(t), tx, durable.ByID(id), "hold", nil, ""); err != nil {
		t.Fatal(err)
	}
	return tx
}

// A key that two instances carry without uniqueness addresses neither:
// Signal and Cancel by that key answer ErrAmbiguousTarget without waiting
// for the row lock a transaction holds on either instance, and two
// transactions that each hold one of them and address the key do not
// deadlock.
func TestByKeyToAmbiguousKeyDoesNotWaitForLocks(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	b := setup(t, nil)
	none := []durable.Status{}
	first := b.insert(t, ctl.With(ctlState{}), &durable.InsertOpts{CorrelationKey: "addr", CorrelationScope: none})
	second := b.insert(t, ctl.With(ctlState{}), &durable.InsertOpts{CorrelationKey: "addr", CorrelationScope: none})

	t.Run("one locked", func(t *testing.T) {
		lockInTx(t, b, second)
		ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
		defer cancel()
		if err := b.client.Signal(ctx, durable.ByKey("addr"), "go", nil, ""); !errors.Is(err, durable.ErrAmbiguousTarget) {
			t.Errorf("Signal: %v, want ErrAmbiguousTarget", err)
		}
		if err := b.client.Cancel(ctx, durable.ByKey("addr"), ""); !errors.Is(err, durable.ErrAmbiguousTarget) {
			t.Errorf("Cancel: %v, want ErrAmbiguousTarget", err)
		}
	})

	for _, op := range byKeyOps {
		t.Run("crossed "+op.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
			defer cancel()
			errs := make(chan error, 2)
			for _, tx := range []pgx.Tx{lockInTx(t, b, first), lockInTx(t, b, second)} {
				go func() {
					err := op.call(ctx, b.client, tx, "addr")
					_ = tx.Rollback(context.Background()) // an aborted tx frees the other
					errs <- err
				}()
			}
			for range 2 {
				if err := <-errs; !errors.Is(err, durable.ErrAmbiguousTarget) {
					t.Errorf("%s by key while holding one of its instances: %v, want ErrAmbiguousTarget", op.name, err)
				}
			}
		})
	}

	for _, id := range []int64{first, second} {
		if in := b.get(t, id); in.Status != durable.StatusRunnable || len(in.Inbox) != 0 {
			t.Errorf("instance %d is %s with inbox %v, want runnable and untouched", id, in.Status, in.Inbox)
		}
	}
}

// Cancel by key takes the lock of the instance's parent first. When the
// key is ambiguous it answers so without waiting for the parents' locks.
func TestCancelByAmbiguousKeyDoesNotWaitForParentLocks(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	none := []durable.Status{}
	kid := durable.InsertParams{Args: ctl.With(ctlState{}), Opts: &durable.InsertOpts{CorrelationKey: "kids", CorrelationScope: none}}
	parent := mustFSM(t, durable.FSMConfig[struct{}]{
		Name: "parent", Initial: "spawn",
		Steps: map[string]durable.StepFunc[struct{}]{
			"spawn": func(context.Context, *durable.Step[struct{}]) (durable.Outcome, error) {
				return durable.Children("after", kid, kid), nil
			},
			"after": func(context.Context, *durable.Step[struct{}]) (durable.Outcome, error) {
				return durable.Done(nil), nil
			},
		},
	})
	b := setup(t, fast(parent, ctl))
	b.start(t)
	pid := b.insert(t, parent.With(struct{}{}), nil)
	b.waitStatus(t, pid, durable.StatusAwaitingChildren)
	lockInTx(t, b, pid)

	ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
	defer cancel()
	if err := b.client.Cancel(ctx, durable.ByKey("kids"), ""); !errors.Is(err, durable.ErrAmbiguousTarget) {
		t.Fatalf("Cancel by a key two children carry, their parent locked: %v, want ErrAmbiguousTarget", err)
	}
}

// With one instance on the key, Signal and Cancel by key take its row
// lock, and so wait for a transaction that holds it. If that transaction
// ends the instance and hands the key to another, they look the key up
// again and reach the new holder, as if they had come after it.
func TestByKeyFollowsKeyThatChangesHandsWhileWaitingForTheLock(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	b := setup(t, nil)
	for _, op := range byKeyOps {
		t.Run(op.name, func(t *testing.T) {
			key := "k-" + op.name
			old := b.insert(t, ctl.With(ctlState{}), &durable.InsertOpts{CorrelationKey: key})
			holder, err := b.pool.Begin(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = holder.Rollback(context.Background()) }()
			if err := b.client.CancelTx(ctxT(t), holder, durable.ByID(old), "replaced"); err != nil {
				t.Fatal(err)
			}
			var holderPID uint32
			if err := holder.QueryRow(ctxT(t), "SELECT pg_backend_pid()").Scan(&holderPID); err != nil {
				t.Fatal(err)
			}

			done := make(chan error, 1)
			go func() {
				done <- pgx.BeginFunc(ctxT(t), b.pool, func(tx pgx.Tx) error {
					return op.call(ctxT(t), b.client, tx, key)
				})
			}()
			waitFor(t, op.name+" by key to wait for the holder's lock", func() bool {
				return b.count(t, "SELECT count(*) FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))", holderPID) > 0
			})
			successor, err := b.client.InsertTx(ctxT(t), holder, ctl.With(ctlState{}), &durable.InsertOpts{CorrelationKey: key})
			if err != nil {
				t.Fatal(err)
			}
			if err := holder.Commit(ctxT(t)); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatalf("%s by key: %v, want it to reach instance %d, which took the key", op.name, err, successor)
			}
			in := b.get(t, successor)
			switch op.name {
			case "SignalTx":
				if len(in.Inbox) != 1 || in.Inbox[0].Name != "go" {
					t.Errorf("the key's new holder has inbox %v, want the signal", in.Inbox)
				}
			case "CancelTx":
				if in.Status != durable.StatusCancelled {
					t.Errorf("the key's new holder is %s, want cancelled", in.Status)
				}
			}
			if in := b.get(t, old); in.Error != "replaced" || len(in.Inbox) != 0 {
				t.Errorf("the key's old holder has error %q and inbox %v, want only its own cancel", in.Error, in.Inbox)
			}
		})
	}
}

// Retry by key addresses the failed instance that carries the key. When
// several do it answers ErrAmbiguousTarget without waiting for the row
// lock a transaction holds on any of them, and two transactions that each
// hold one of them and retry by the key do not deadlock.
func TestRetryByAmbiguousKeyDoesNotWaitForLocks(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	b := setup(t, nil)
	var ids []int64
	for range 2 {
		id := b.insert(t, ctl.With(ctlState{}), &durable.InsertOpts{CorrelationKey: "failed"})
		b.exec(t, `UPDATE durable_instance SET status = 'failed', finished_at = now(), error = 'boom' WHERE id = $1`, id)
		ids = append(ids, id)
	}
	lock := func(t *testing.T, id int64) pgx.Tx {
		t.Helper()
		tx, err := b.pool.Begin(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
		if _, err := tx.Exec(ctxT(t), "SELECT 1 FROM durable_instance WHERE id = $1 FOR NO KEY UPDATE", id); err != nil {
			t.Fatal(err)
		}
		return tx
	}

	t.Run("one locked", func(t *testing.T) {
		lock(t, ids[1])
		ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
		defer cancel()
		if _, err := b.client.Retry(ctx, durable.ByKey("failed"), nil); !errors.Is(err, durable.ErrAmbiguousTarget) {
			t.Errorf("Retry: %v, want ErrAmbiguousTarget", err)
		}
	})
	t.Run("crossed", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
		defer cancel()
		errs := make(chan error, 2)
		for _, tx := range []pgx.Tx{lock(t, ids[0]), lock(t, ids[1])} {
			go func() {
				_, err := b.client.RetryTx(ctx, tx, durable.ByKey("failed"), nil)
				_ = tx.Rollback(context.Background())
				errs <- err
			}()
		}
		for range 2 {
			if err := <-errs; !errors.Is(err, durable.ErrAmbiguousTarget) {
				t.Errorf("RetryTx by key while holding one of its instances: %v, want ErrAmbiguousTarget", err)
			}
		}
	})
	for _, id := range ids {
		if in := b.get(t, id); in.Status != durable.StatusFailed {
			t.Errorf("instance %d is %s, want failed", id, in.Status)
		}
	}
}
