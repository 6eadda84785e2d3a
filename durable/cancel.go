package durable

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/jackc/pgx/v5"
)

// ErrTerminal is returned by Cancel and CancelTx addressed by id to an
// instance that has already ended (done, failed or cancelled). Nothing is
// changed. Cancel addressed by key returns ErrNoTarget instead when no live
// instance carries the key, whether or not an ended one does.
var ErrTerminal = errors.New("durable: instance has ended")

// cancelSQL ends a live instance as cancelled, with the reason as its
// error. Its row lock is already held (lockByIDSQL or lockHolderSQL). The
// status makes the fence of the step it may be running match no row: that
// step's commit changes nothing. An executing row keeps its lease (see
// keepLeaseSQL).
const cancelSQL = `
UPDATE durable_instance
SET status = 'cancelled', error = $2, finished_at = now(), ` + keepLeaseSQL + `,
    awaiting = NULL, await_deadline = NULL, updated_at = now()
WHERE id = $1 AND status IN ('runnable', 'executing', 'awaiting_signal', 'awaiting_children')`

// keepLeaseSQL is how Cancel's statements set the lease of a row they
// cancel: an executing row keeps its lease, and with it its concurrency
// slot (holdsSlotSQL), because its step still runs until the engine
// learns of the cancel and the step returns; a key's limit must hold
// meanwhile. The heartbeat no longer extends such a lease (the row is not
// executing) and cancels the step's context; the engine clears the lease
// once the step has ended (unleaseSQL), the reaper once it has expired
// (reapCancelledSQL). Other rows have no lease.
const keepLeaseSQL = `lease_owner = CASE WHEN status = 'executing' THEN lease_owner END,
    lease_expires_at = CASE WHEN status = 'executing' THEN lease_expires_at END`

// unleaseSQL clears the leases that engine $1 holds under the claims $2,
// $3 (ids and claim counts) on rows cancelled meanwhile, whose steps have
// ended or never ran: their concurrency slots are free. It returns the
// queue and the concurrency key of each row it changed.
const unleaseSQL = `
UPDATE durable_instance i
SET lease_owner = NULL, lease_expires_at = NULL
FROM unnest($2::bigint[], $3::bigint[]) AS r(id, claims)
WHERE i.id = r.id AND i.claims = r.claims AND i.status = 'cancelled' AND i.lease_owner = $1
RETURNING i.queue, coalesce(i.concurrency_key, '')`

// reapCancelledSQL clears up to $1 leases of cancelled rows that expired:
// their steps overran the lease or their engine died, and their
// concurrency slots are free. It returns the queue and the concurrency
// key of each row it changed.
const reapCancelledSQL = `
WITH expired AS (
    SELECT id FROM durable_instance
    WHERE status = 'cancelled' AND lease_owner IS NOT NULL AND lease_expires_at < now()
    ORDER BY lease_expires_at
    LIMIT $1
    FOR UPDATE SKIP LOCKED
)
UPDATE durable_instance i
SET lease_owner = NULL, lease_expires_at = NULL
FROM expired
WHERE i.id = expired.id
RETURNING i.queue, coalesce(i.concurrency_key, '')`

// unlease frees the slots that cs, claims whose steps have ended or will
// not run, hold on rows cancelled meanwhile, and wakes the engines serving
// the queues where rows of their keys wait. A failure is only logged: the
// leases expire and the reaper frees the slots then.
func (e *engine) unlease(cs ...*claimed) {
	if len(cs) == 0 {
		return
	}
	ids, claims := fence(cs)
	ctx, cancel := e.dbContext()
	queues, keys, _, err := e.freedBy(ctx, unleaseSQL, e.owner, ids, claims)
	cancel()
	if err != nil {
		e.c.cfg.Logger.Error("durable: freeing the slots of cancelled instances failed; their leases will expire",
			slog.Any("error", err))
		return
	}
	e.wakeFreed(queues, keys)
}

// reapCancelled frees the slots of cancelled rows whose lease expired.
func (e *engine) reapCancelled() {
	for {
		ctx, cancel := e.dbContext()
		queues, keys, n, err := e.freedBy(ctx, reapCancelledSQL, reapBatch)
		cancel()
		if err != nil {
			e.c.cfg.Logger.Error("durable: reaper failed", slog.Any("error", err))
			return
		}
		e.wakeFreed(queues, keys)
		if n < reapBatch {
			return
		}
	}
}

// freedBy runs query, which frees slots and returns the queue and the
// concurrency key ("" for none) of each row it changed, and returns the
// set of those queues, the keys and the number of rows.
func (e *engine) freedBy(ctx context.Context, query string, args ...any) (queues map[string]bool, keys []string, n int, err error) {
	rows, err := e.c.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, nil, 0, err
	}
	queues = map[string]bool{}
	var queue, key string
	_, err = pgx.ForEachRow(rows, []any{&queue, &key}, func() error {
		queues[queue] = true
		if key != "" {
			keys = append(keys, key)
		}
		n++
		return nil
	})
	if err != nil {
		return nil, nil, 0, err
	}
	return queues, keys, n, nil
}

// Cancel ends the live instance target addresses as cancelled: no step
// runs again, the step it may be running cannot commit its outcome (its
// commit is fenced off, and its context is cancelled once the engine's
// heartbeat notices the lost lease), its inbox is deleted and its
// correlation key is freed unless its scope holds StatusCancelled. reason
// is stored as the instance's Error. An instance cancelled while its step
// runs keeps its concurrency slot (Instance.LeaseOwner still names the
// engine) until the step has returned, or until its lease, which is no
// longer extended, has expired: its concurrency key's limit holds.
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
// leaves end does not deadlock. Addressed by key, it looks up the instances
// that carry the key before it locks any, as Signal does: it answers
// ErrAmbiguousTarget without waiting for their locks or their parents'; if
// the instance found ends before Cancel holds its lock, Cancel gives back
// the locks it took and looks the key up again.
func (c *Client) Cancel(ctx context.Context, target Target, reason string) error {
	var ended []int64
	var wake []string
	err := pgx.BeginTxFunc(ctx, c.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		var err error
		ended, wake, err = cancel(ctx, tx, target, reason)
		return err
	})
	if err != nil {
		return err
	}
	c.ended(ended...) // committed: wake the Waits on them
	for _, queue := range wake {
		c.pokeLocal(queue) // the parent it released
	}
	return nil
}

// CancelTx is Cancel in the caller's transaction, which it never commits
// or rolls back: the instance is cancelled only once tx commits, and until
// then tx holds its row lock, and its parent's and its descendants': the
// commits of their steps, and of the ends of their children, wait for tx
// meanwhile, their leases kept, except that a step of a locked row still
// running when its lease ends is cancelled (see SignalTx). On an error tx
// is left usable only if the error is ErrNoTarget, ErrAmbiguousTarget or
// ErrTerminal, and then holds none of the locks CancelTx took: an ended
// instance is not held up by tx, nor is the parent of an instance that
// ended while CancelTx waited for the parent's lock.
//
// Client.Wait learns of the end by polling only: CancelTx cannot tell when
// tx commits.
func (c *Client) CancelTx(ctx context.Context, tx pgx.Tx, target Target, reason string) error {
	_, _, err := cancel(ctx, tx, target, reason)
	return err
}

// cancel is Cancel in tx; it returns the ids of the instances it ended
// (the target and the descendants cancelled with it) and the queue of the
// parent it released, if it did.
func cancel(ctx context.Context, tx pgx.Tx, target Target, reason string) (ended []int64, wake []string, err error) {
	if err := errors.Join(checkText("cancel reason", reason), target.check()); err != nil {
		return nil, nil, err
	}
	id, err := lockTarget(ctx, tx, target)
	if err != nil {
		return nil, nil, err
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
	br := tx.SendBatch(ctx, b)
	err = func() error {
		for range 3 { // lockDescendantsSQL, cancelSQL, dropInboxSQL
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		if wake, err = releasedParentQueues(br); err != nil {
			return err
		}
		gone, err := cancelledDescendants(br)
		ended = append([]int64{id}, gone...)
		return err
	}()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, nil, fmt.Errorf("durable: Cancel: %w", err)
	}
	return ended, wake, nil
}

// parentToLockSQL returns the parent of instance $1 that its end counts
// itself off, whose lock Cancel must take before the instance's.
const parentToLockSQL = `SELECT parent_id FROM durable_instance WHERE id = $1 AND releases_parent`

// lockTarget takes, for Cancel, the row locks of the live instance target
// addresses and of its parent, the parent's first, and returns the
// instance's id. By id, both are locked under a savepoint, rolled back if
// the instance has ended or has no row: an instance that ended while
// lockTarget waited for its parent's lock, or for its own, leaves neither
// locked (PostgreSQL keeps the lock of a row it waited for even when the
// row no longer matches). By key, the instance is looked up without locks
// first (lockByKey), then its parent locked, then the instance, if it
// still carries the key: else the look-up and the parent's lock are undone
// (a savepoint) and made again.
func lockTarget(ctx context.Context, tx pgx.Tx, target Target) (int64, error) {
	if target.key == "" {
		return lockByIDInOrder(ctx, tx, target)
	}
	for range keyTries {
		sp, err := tx.Begin(ctx)
		if err != nil {
			return 0, fmt.Errorf("durable: Cancel: %w", err)
		}
		id, inOrder, err := lockKeyInOrder(ctx, sp, target)
		if err != nil || !inOrder {
			if rerr := sp.Rollback(ctx); rerr != nil && err == nil {
				err = fmt.Errorf("durable: Cancel: %w", rerr)
			}
			if err != nil {
				return 0, err
			}
			continue
		}
		if err := sp.Commit(ctx); err != nil {
			return 0, fmt.Errorf("durable: Cancel: %w", err)
		}
		return id, nil
	}
	return 0, keyChangedHands("Cancel", target.key)
}

// lockByIDInOrder is lockTarget by id.
func lockByIDInOrder(ctx context.Context, tx pgx.Tx, target Target) (int64, error) {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("durable: Cancel: %w", err)
	}
	id, err := func() (int64, error) {
		if _, err := lockParent(ctx, sp, target.id); err != nil {
			return 0, fmt.Errorf("durable: Cancel: %w", err)
		}
		return lockLive(ctx, sp, target, "Cancel")
	}()
	if err != nil {
		if rerr := sp.Rollback(ctx); rerr != nil {
			return 0, fmt.Errorf("durable: Cancel: %w (and rolling back: %v)", err, rerr)
		}
		return 0, err
	}
	if err := sp.Commit(ctx); err != nil {
		return 0, fmt.Errorf("durable: Cancel: %w", err)
	}
	return id, nil
}

// lockKeyInOrder is one try of lockTarget by key: it reports whether it
// locked the instance that carries the key, after the parent it has to
// lock, if any. It returns ErrNoTarget or ErrAmbiguousTarget, before
// taking any lock, when no live instance or several carry the key.
func lockKeyInOrder(ctx context.Context, tx pgx.Tx, target Target) (id int64, inOrder bool, err error) {
	if id, err = lookupKey(ctx, tx, target, "Cancel"); err != nil {
		return 0, false, err
	}
	parents, err := lockParent(ctx, tx, id)
	if err != nil {
		return 0, false, fmt.Errorf("durable: Cancel: %w", err)
	}
	if _, ok, err := lockHolder(ctx, tx, id, target.key, "Cancel"); err != nil || !ok {
		return 0, false, err // ended since the look-up: look again
	}
	var parent int64
	switch err := tx.QueryRow(ctx, parentToLockSQL, id).Scan(&parent); {
	case errors.Is(err, pgx.ErrNoRows):
		return id, true, nil
	case err != nil:
		return 0, false, fmt.Errorf("durable: Cancel: %w", err)
	}
	return id, slices.Contains(parents, parent), nil
}

// lockLive takes the row lock of the live instance target addresses and
// returns its id. op names the caller in errors.
func lockLive(ctx context.Context, tx pgx.Tx, target Target, op string) (int64, error) {
	if target.key != "" {
		h, err := lockByKey(ctx, tx, target, op)
		return h.id, err
	}
	if target.id <= 0 {
		return 0, fmt.Errorf("durable: %s of the zero Target: %w", op, ErrNoTarget)
	}
	h, ok, err := lockByID(ctx, tx, target.id, op)
	switch {
	case err != nil:
		return 0, err
	case !ok:
		return 0, fmt.Errorf("%w: %s", ErrNoTarget, target)
	case h.status.Terminal():
		return 0, fmt.Errorf("%w: %s is %s", ErrTerminal, target, h.status)
	}
	return h.id, nil
}
