package durable_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemgo/idem/durable"
)

// beginTx begins a transaction on b's pool, rolled back when t ends, and
// returns it with its backend's pid.
func beginTx(t *testing.T, b *testBundle) (pgx.Tx, uint32) {
	t.Helper()
	tx, err := b.pool.Begin(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	var pid uint32
	if err := tx.QueryRow(ctxT(t), "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	return tx, pid
}

// blocking reports whether a session waits for a lock that the backend
// pid holds.
func (b *testBundle) blocking(t *testing.T, pid uint32) bool {
	return b.count(t, "SELECT count(*) FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))", pid) > 0
}

// SignalTx and CancelTx by id to an instance that has ended answer
// ErrNoTarget and ErrTerminal without locking its row: the caller's
// transaction, which goes on, holds up neither a Retry of the instance
// nor its garbage collection.
func TestByIDToAnEndedInstanceLeavesItUnlocked(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	cfg := fast(ctl)
	cfg.GCRetention, cfg.GCInterval = time.Hour, 20*time.Millisecond
	b := setup(t, cfg)
	ended := func(status durable.Status, ago string) int64 {
		id := b.insert(t, ctl.With(ctlState{}), nil)
		b.exec(t, `UPDATE durable_instance SET status = $2, finished_at = now() - $3::interval WHERE id = $1`,
			id, string(status), ago)
		return id
	}
	failed := ended(durable.StatusFailed, "0")
	done := ended(durable.StatusDone, "0")
	old := ended(durable.StatusCancelled, "2 hours") // past GCRetention

	tx, _ := beginTx(t, b)
	for _, id := range []int64{failed, done, old} {
		if err := b.client.SignalTx(ctxT(t), tx, durable.ByID(id), "go", nil, ""); !errors.Is(err, durable.ErrNoTarget) {
			t.Fatalf("SignalTx to ended instance %d: %v, want ErrNoTarget", id, err)
		}
		if err := b.client.CancelTx(ctxT(t), tx, durable.ByID(id), ""); !errors.Is(err, durable.ErrTerminal) {
			t.Fatalf("CancelTx of ended instance %d: %v, want ErrTerminal", id, err)
		}
	}

	ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
	defer cancel()
	if got, err := b.client.Retry(ctx, durable.ByID(failed), nil); err != nil || got != failed {
		t.Fatalf("Retry while a transaction that signalled it is open: %d, %v; want %d", got, err, failed)
	}
	if _, err := b.client.Retry(ctx, durable.ByID(done), nil); !errors.Is(err, durable.ErrNotFailed) {
		t.Fatalf("Retry of the done instance: %v, want ErrNotFailed", err)
	}
	b.start(t)
	for b.count(t, "SELECT count(*) FROM durable_instance WHERE id = $1", old) != 0 {
		if ctx.Err() != nil {
			t.Fatal("the garbage collector did not delete the old cancelled row while a transaction that signalled it is open")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := tx.Commit(ctxT(t)); err != nil {
		t.Fatalf("the transaction after ErrNoTarget and ErrTerminal: %v", err)
	}
	if in := b.waitStatus(t, failed, durable.StatusAwaitingSignal); len(in.Inbox) != 0 {
		t.Fatalf("the retried instance has inbox %v, want none", in.Inbox)
	}
}

// An instance can end while SignalTx or CancelTx by id waits for a row
// lock that the transaction ending it holds. They answer ErrNoTarget and
// ErrTerminal. CancelTx leaves nothing locked in the caller's transaction,
// neither the instance nor the parent it locks first. SignalTx keeps the
// lock of the instance, as PostgreSQL leaves it with a transaction that
// waited for it, though the row no longer matched: a Retry waits for that
// transaction.
func TestByIDToAnInstanceEndingWhileWaitingForItsLock(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	b := setup(t, nil)
	for _, tc := range []struct {
		name  string
		child bool // the instance counts itself off a parent
		call  func(ctx context.Context, tx pgx.Tx, id int64) error
		want  error
		keeps bool // the caller's transaction keeps the instance locked
	}{
		{"SignalTx", false, func(ctx context.Context, tx pgx.Tx, id int64) error {
			return b.client.SignalTx(ctx, tx, durable.ByID(id), "go", nil, "")
		}, durable.ErrNoTarget, true},
		{"CancelTx", false, func(ctx context.Context, tx pgx.Tx, id int64) error {
			return b.client.CancelTx(ctx, tx, durable.ByID(id), "")
		}, durable.ErrTerminal, false},
		{"CancelTx of a child", true, func(ctx context.Context, tx pgx.Tx, id int64) error {
			return b.client.CancelTx(ctx, tx, durable.ByID(id), "")
		}, durable.ErrTerminal, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := b.insert(t, ctl.With(ctlState{}), nil)
			var parent int64
			if tc.child {
				parent = b.insert(t, ctl.With(ctlState{}), nil)
				b.exec(t, `UPDATE durable_instance SET parent_id = $1, releases_parent = true WHERE id = $2`, parent, id)
				b.exec(t, `UPDATE durable_instance SET status = 'awaiting_children', pending_children = 1 WHERE id = $1`, parent)
			}
			// The ending transaction locks the parent first, as a step's
			// commit does, then fails the instance.
			ender, enderPID := beginTx(t, b)
			if parent != 0 {
				if _, err := ender.Exec(ctxT(t), `SELECT 1 FROM durable_instance WHERE id = $1 FOR NO KEY UPDATE`, parent); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := ender.Exec(ctxT(t), `UPDATE durable_instance SET status = 'failed', finished_at = now(), error = 'boom', releases_parent = false WHERE id = $1`, id); err != nil {
				t.Fatal(err)
			}

			tx, pid := beginTx(t, b)
			got := make(chan error, 1)
			go func() { got <- tc.call(ctxT(t), tx, id) }()
			waitFor(t, tc.name+" to wait for the ending transaction", func() bool { return b.blocking(t, enderPID) })
			if err := ender.Commit(ctxT(t)); err != nil {
				t.Fatal(err)
			}
			if err := <-got; !errors.Is(err, tc.want) {
				t.Fatalf("%s: %v, want %v", tc.name, err, tc.want)
			}

			ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
			defer cancel()
			if parent != 0 {
				if err := b.client.Signal(ctx, durable.ByID(parent), "go", nil, ""); err != nil {
					t.Fatalf("Signal to the parent while the transaction that got ErrTerminal is open: %v", err)
				}
			}
			retried := make(chan error, 1)
			go func() { _, err := b.client.Retry(ctx, durable.ByID(id), nil); retried <- err }()
			if tc.keeps {
				waitFor(t, "Retry to wait for the transaction that got "+tc.want.Error(), func() bool { return b.blocking(t, pid) })
				if err := tx.Rollback(ctxT(t)); err != nil {
					t.Fatal(err)
				}
			}
			if err := <-retried; err != nil {
				t.Fatalf("Retry: %v", err)
			}
		})
	}
}
