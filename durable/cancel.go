package durable

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// ErrTerminal is returned by Cancel and CancelTx addressed by id to an
// instance that has already ended (done, failed or cancelled). Nothing is
// changed. Cancel addressed by key returns ErrNoTarget instead when no live
// instance carries the key, whether or not an ended one does.
var ErrTerminal = errors.New("durable: instance has ended")

// cancelSQL ends a live instance as cancelled, with the reason as its
// error. Its row lock is already held (lockByIDSQL or lockByKeySQL). The
// cleared lease, and the status, make the fence of the step it may be
// running match no row: that step's commit changes nothing.
const cancelSQL = `
UPDATE durable_instance
SET status = 'cancelled', error = $2, finished_at = now(),
    lease_owner = NULL, lease_expires_at = NULL, awaiting = NULL, await_deadline = NULL,
    updated_at = now()
WHERE id = $1 AND status IN ('runnable', 'executing', 'awaiting_signal', 'awaiting_children')`

// Cancel ends the live instance target addresses as cancelled: no step
// runs again, the step it may be running cannot commit its outcome (its
// commit is fenced off, and its context is cancelled once the engine's
// heartbeat notices the lost lease), its inbox is deleted and its
// correlation key is freed unless its scope holds StatusCancelled. reason
// is stored as the instance's Error.
//
// Cancel returns ErrNoTarget when the id has no row or no live instance
// occupies the key, ErrAmbiguousTarget when several live instances carry
// the key without uniqueness, and ErrTerminal when the instance addressed
// by id has already ended. Nothing is changed then.
//
// Cancellation is one transaction of statements on the instance's locked
// row: it cancels the instance's live children (and theirs) too, so that a
// parent and its children end together, and a cancelled child releases its
// waiting parent. It takes its row locks in the engine's order, a parent
// before its children: the instance's parent, the instance, then its
// descendants level by level, by ascending id within a level. A commit that
// ends a child locks its parent first too, so cancelling a tree while its
// leaves end does not deadlock.
func (c *Client) Cancel(ctx context.Context, target Target, reason string) error {
	return pgx.BeginTxFunc(ctx, c.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		return cancel(ctx, tx, target, reason)
	})
}

// CancelTx is Cancel in the caller's transaction, which it never commits
// or rolls back: the instance is cancelled only once tx commits, and until
// then tx holds its row lock. On an error tx is left usable only if the
// error is ErrNoTarget, ErrAmbiguousTarget or ErrTerminal.
func (c *Client) CancelTx(ctx context.Context, tx pgx.Tx, target Target, reason string) error {
	return cancel(ctx, tx, target, reason)
}

func cancel(ctx context.Context, tx pgx.Tx, target Target, reason string) error {
	if err := checkText("cancel reason", reason); err != nil {
		return err
	}
	if err := lockParent(ctx, tx, target); err != nil {
		return fmt.Errorf("durable: Cancel: %w", err)
	}
	id, err := lockLive(ctx, tx, target, "Cancel")
	if err != nil {
		return err
	}
	var why *string
	if reason != "" {
		why = &reason
	}
	b := &pgx.Batch{}
	b.Queue(lockDescendantsSQL, id) // parents before children, or the cascade can deadlock
	b.Queue(cancelSQL, id, why)
	b.Queue(dropInboxSQL, id)
	b.Queue(releaseParentSQL, id)              // a child releases its parent
	b.Queue(cancelChildrenSQL, id, why, false) // a parent's live descendants end with it
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("durable: Cancel: %w", err)
	}
	return nil
}

// lockLive takes the row lock of the live instance target addresses and
// returns its id. op names the caller in errors.
func lockLive(ctx context.Context, tx pgx.Tx, target Target, op string) (int64, error) {
	if target.key == "" && target.id <= 0 {
		return 0, fmt.Errorf("durable: %s of the zero Target: %w", op, ErrNoTarget)
	}
	var (
		rows pgx.Rows
		err  error
	)
	if target.key != "" {
		rows, err = tx.Query(ctx, lockByKeySQL, target.key)
	} else {
		rows, err = tx.Query(ctx, lockByIDSQL, target.id)
	}
	if err != nil {
		return 0, fmt.Errorf("durable: %s: %w", op, err)
	}
	type found struct {
		id     int64
		status Status
	}
	targets, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (found, error) {
		var f found
		var awaiting []string
		var queue string
		err := r.Scan(&f.id, &f.status, &awaiting, &queue)
		return f, err
	})
	if err != nil {
		return 0, fmt.Errorf("durable: %s: %w", op, err)
	}
	switch {
	case len(targets) == 0:
		return 0, fmt.Errorf("%w: %s", ErrNoTarget, target)
	case len(targets) > 1:
		return 0, fmt.Errorf("%w: %s", ErrAmbiguousTarget, target)
	case targets[0].status.Terminal():
		return 0, fmt.Errorf("%w: %s is %s", ErrTerminal, target, targets[0].status)
	}
	return targets[0].id, nil
}
