package durable

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ErrNotFailed is returned by Retry when the instance it addresses is not
// failed: live, done or cancelled. Nothing is changed.
var ErrNotFailed = errors.New("durable: instance is not failed")

// RetryOpts are the options of Retry. A nil *RetryOpts runs the step at
// once.
type RetryOpts struct {
	// At is the earliest time the step runs again. Zero: the database's
	// now().
	At time.Time
}

const retryLockByIDSQL = `
SELECT id, status, coalesce(correlation_key, ''), queue FROM durable_instance WHERE id = $1 FOR NO KEY UPDATE`

// retryLookupByKeySQL finds, without locking them, up to two of the
// failed instances carrying key $1, whether or not they still occupy it.
const retryLookupByKeySQL = `
SELECT id FROM durable_instance WHERE correlation_key = $1 AND status = 'failed' LIMIT 2`

// retryLockByKeySQL takes the row lock of instance $1, which
// retryLookupByKeySQL found, if it still is a failed instance carrying key
// $2: a row changed while the statement waited for its lock is checked
// again in its newest version (READ COMMITTED).
const retryLockByKeySQL = `
SELECT id, status, coalesce(correlation_key, ''), queue FROM durable_instance
WHERE id = $1 AND correlation_key = $2 AND status = 'failed'
FOR NO KEY UPDATE`

// reviveSQL makes a failed instance runnable at its step, at attempt 1,
// with no reaps counted (Config.MaxReaps). Its error stays until the step
// commits, as that of a pending retry does.
// Leaving failed may bring the row into its correlation scope, where the
// unique index on correlation_guard rejects it if another row holds the
// key.
const reviveSQL = `
UPDATE durable_instance
SET status = 'runnable', attempt = 1, reaps = 0, eligible_at = coalesce($2, now()), finished_at = NULL,
    result = NULL, updated_at = now()
WHERE id = $1 AND status = 'failed'`

// correlationGuardIndex is the unique index that keeps keys unique.
const correlationGuardIndex = "durable_instance_correlation_guard_idx"

// Retry makes a failed instance runnable again at the step it failed in,
// with the attempt reset to 1, at once or at opts.At, and returns its id.
// Its state is the last committed one; its inbox, deleted when it failed,
// stays empty, and the dedup keys it received still count; its count of
// reaps in a row (Config.MaxReaps) starts over. It is meant for operators,
// once the cause of the failure is fixed.
//
// target addresses the instance by id, or by key: ByKey here reaches the
// failed instance carrying the key (a failed instance no longer occupies
// its key under the default scope), ErrAmbiguousTarget when several
// failed instances carry it: they are looked up before any is locked, so
// that answer does not wait for their row locks. Only failed instances are
// retried: a live, done or cancelled one gives ErrNotFailed. Cancellation
// is a decision, not an accident, so it is not undone by Retry; insert a
// new instance instead.
//
// The instance must be able to take its correlation key back: when another
// instance occupies it, nothing is changed and the error is a
// *DuplicateError carrying the occupant's id (errors.Is(err,
// ErrDuplicate)). An id with no row, or a key no failed instance carries,
// gives ErrNoTarget.
func (c *Client) Retry(ctx context.Context, target Target, opts *RetryOpts) (int64, error) {
	if err := opts.check(); err != nil {
		return 0, err
	}
	var id int64
	var queue string
	err := pgx.BeginTxFunc(ctx, c.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) (err error) {
		id, queue, err = retryTx(ctx, tx, target, retryAt(opts))
		return err
	})
	if err != nil {
		return 0, err
	}
	var at time.Time // zero: at once
	if opts != nil {
		at = opts.At
	}
	c.madeLocal(queue, at)
	return id, nil
}

// RetryTx is Retry in the caller's transaction, which it never commits or
// rolls back: the instance is runnable, and its step may run, only once tx
// commits, and until then tx holds its row lock. If tx rolls back, the
// instance stays failed. The transaction should be READ COMMITTED, so that
// Retry can see the occupant of the key it wants back.
//
// Its errors are Retry's. Each try runs under a savepoint of tx, so that
// on ErrNotFailed, ErrNoTarget, ErrAmbiguousTarget or a *DuplicateError
// nothing of RetryTx is left in tx and tx is still usable; after any other
// error, tx should be rolled back.
func (c *Client) RetryTx(ctx context.Context, tx pgx.Tx, target Target, opts *RetryOpts) (int64, error) {
	if err := opts.check(); err != nil {
		return 0, err
	}
	id, _, err := retryTx(ctx, tx, target, retryAt(opts))
	return id, err
}

// check returns an ErrUnstorable error for an At timestamptz cannot store.
func (o *RetryOpts) check() error {
	if o == nil || o.At.IsZero() {
		return nil
	}
	return checkTime("RetryOpts.At", o.At)
}

// retryAt is the time opts asks the step to run at; nil: at once.
func retryAt(opts *RetryOpts) *time.Time {
	if opts == nil || opts.At.IsZero() {
		return nil
	}
	t := opts.At
	return &t
}

// retryTx revives the instance target addresses in tx and returns its id
// and queue. Each try is a savepoint: a unique violation on the key, which
// would abort tx, is rolled back to it, and the occupant looked up with a
// fresh snapshot (READ COMMITTED). An occupant that left the key before the
// look-up is worth another try.
func retryTx(ctx context.Context, tx pgx.Tx, target Target, at *time.Time) (int64, string, error) {
	if err := target.check(); err != nil {
		return 0, "", err
	}
	for try := 0; ; try++ {
		sp, err := tx.Begin(ctx)
		if err != nil {
			return 0, "", fmt.Errorf("durable: Retry: %w", err)
		}
		id, key, queue, err := revive(ctx, sp, target, at)
		if err == nil {
			if err := sp.Commit(ctx); err != nil {
				return 0, "", fmt.Errorf("durable: Retry: %w", err)
			}
			return id, queue, nil
		}
		if rerr := sp.Rollback(ctx); rerr != nil {
			return 0, "", fmt.Errorf("durable: Retry: %w (and rolling back: %v)", err, rerr)
		}
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "23505" || pe.ConstraintName != correlationGuardIndex {
			return 0, "", err
		}
		var occupant int64
		if err := tx.QueryRow(ctx, occupantSQL, key).Scan(&occupant); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return 0, "", fmt.Errorf("durable: Retry: %w", err)
		}
		if occupant != 0 || try == 2 {
			return 0, "", &DuplicateError{CorrelationKey: key, ID: occupant}
		}
		// The occupant left the key before the look-up: try again.
	}
}

// lockFailedByKey takes the row lock of the failed instance that carries
// target.key. As lockByKey does, it looks the failed instances carrying the
// key up without locks, so that ErrAmbiguousTarget is answered at once,
// whatever locks their rows are under, and locks the one found; if that
// instance has left failed meanwhile, it looks again, up to keyTries times.
func lockFailedByKey(ctx context.Context, tx pgx.Tx, target Target) (failedRow, error) {
	for range keyTries {
		rows, err := tx.Query(ctx, retryLookupByKeySQL, target.key)
		if err != nil {
			return failedRow{}, fmt.Errorf("durable: Retry: %w", err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		switch {
		case err != nil:
			return failedRow{}, fmt.Errorf("durable: Retry: %w", err)
		case len(ids) == 0:
			return failedRow{}, fmt.Errorf("%w: %s", ErrNoTarget, target)
		case len(ids) > 1:
			return failedRow{}, fmt.Errorf("%w: %s (several failed instances carry it)", ErrAmbiguousTarget, target)
		}
		var f failedRow
		err = tx.QueryRow(ctx, retryLockByKeySQL, ids[0], target.key).Scan(&f.id, &f.status, &f.key, &f.queue)
		if !errors.Is(err, pgx.ErrNoRows) {
			if err != nil {
				return failedRow{}, fmt.Errorf("durable: Retry: %w", err)
			}
			return f, nil
		}
	}
	return failedRow{}, keyChangedHands("Retry", target.key)
}

// failedRow is the locked row of the instance Retry revives.
type failedRow struct {
	id         int64
	status     Status
	key, queue string
}

// revive locks the failed instance target addresses and makes it runnable.
// It returns its id, key and queue.
func revive(ctx context.Context, tx pgx.Tx, target Target, at *time.Time) (id int64, key, queue string, err error) {
	var f failedRow
	switch {
	case target.key != "":
		if f, err = lockFailedByKey(ctx, tx, target); err != nil {
			return 0, "", "", err
		}
	case target.id <= 0:
		return 0, "", "", fmt.Errorf("durable: Retry of the zero Target: %w", ErrNoTarget)
	default:
		err = tx.QueryRow(ctx, retryLockByIDSQL, target.id).Scan(&f.id, &f.status, &f.key, &f.queue)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return 0, "", "", fmt.Errorf("%w: %s", ErrNoTarget, target)
		case err != nil:
			return 0, "", "", fmt.Errorf("durable: Retry: %w", err)
		case f.status != StatusFailed:
			return 0, "", "", fmt.Errorf("%w: %s is %s", ErrNotFailed, target, f.status)
		}
	}
	b := &pgx.Batch{}
	b.Queue(reviveSQL, f.id, at)
	b.Queue(notifyEligibleSQL, []string{f.queue}, []*time.Time{at}, []int64{0})
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		// Retry looks for a unique violation in it, and the key.
		return f.id, f.key, f.queue, fmt.Errorf("durable: Retry: %w", err)
	}
	return f.id, f.key, f.queue, nil
}
