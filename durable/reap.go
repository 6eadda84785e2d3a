package durable

import (
	"context"
	"errors"
	"log/slog"

	"github.com/jackc/pgx/v5"
)

// DefaultMaxReaps is the default of Config.MaxReaps.
const DefaultMaxReaps = 25

// ErrReapedTooOften begins the Error of an instance the reaper failed
// because the lease of its step expired Config.MaxReaps times in a row: a
// step that hangs past its lease, or takes its engine down, every time it
// runs. Test for it with strings.HasPrefix(in.Error,
// ErrReapedTooOften.Error()). Client.Retry runs such an instance again,
// with its count started over.
var ErrReapedTooOften = errors.New("durable: reaped too often")

// reapsNowSQL is a row's count of reaps in a row, this reap included: one
// more than before if the row has been claimed once since the last reap
// (no outcome was committed in between: that and the next lease would
// have taken one more claim), else 1.
const reapsNowSQL = `(CASE WHEN reaped_claim = claims - 1 THEN reaps + 1 ELSE 1 END)`

// cappedSQL finds up to $2 rows whose lease expired and whose reap would
// be the $1th in a row, which the reaper fails rather than returns.
const cappedSQL = `
SELECT id FROM durable_instance
WHERE status = 'executing' AND lease_expires_at < now() AND ` + reapsNowSQL + ` >= $1
ORDER BY lease_expires_at
LIMIT $2`

// failReapedSQL fails row $1 as cappedSQL found it, if it still is so once
// locked, with an error that begins with $3 (ErrReapedTooOften). Its
// parent's lock and its own are taken first (lockReapedParentSQL,
// lockReapedSQL), in the engine's lock order, and the statements that
// follow drop its inbox and release its parent, as the end of a step does.
// It returns the row's concurrency key ("" for none), whose slot it frees.
const failReapedSQL = `
UPDATE durable_instance
SET status = 'failed', attempt = attempt + 1, finished_at = now(),
    error = $3 || ': the lease of step ' || step || ' expired ' || ` + reapsNowSQL + ` ||
            ' times in a row, the last held by ' || coalesce(lease_owner, '?'),
    reaps = ` + reapsNowSQL + `, reaped_claim = claims,
    lease_owner = NULL, lease_expires_at = NULL, awaiting = NULL, await_deadline = NULL,
    updated_at = now()
WHERE id = $1 AND status = 'executing' AND lease_expires_at < now() AND ` + reapsNowSQL + ` >= $2
RETURNING coalesce(concurrency_key, '')`

// lockReapedParentSQL takes, without waiting, the lock of the parent that
// instance $1 would release (lockParentSQL, skipping a locked row): it
// returns the parent's id, or 0 if there is none (or its row is gone, as
// lockParentSQL goes on then too), and no row if the parent is locked.
const lockReapedParentSQL = `
WITH parent AS (
    SELECT p.id FROM durable_instance c JOIN durable_instance p ON p.id = c.parent_id
    WHERE c.id = $1 AND c.releases_parent
), locked AS (
    SELECT p.id FROM durable_instance p WHERE p.id = (SELECT id FROM parent)
    FOR NO KEY UPDATE SKIP LOCKED
)
SELECT coalesce((SELECT id FROM parent), 0) WHERE NOT EXISTS (SELECT 1 FROM parent) OR EXISTS (SELECT 1 FROM locked)`

// lockReapedSQL takes, without waiting, the lock of row $1, after its
// parent's.
const lockReapedSQL = `SELECT id FROM durable_instance WHERE id = $1 FOR UPDATE SKIP LOCKED`

// failReaped fails the rows whose lease expired Config.MaxReaps times in a
// row, each in a transaction of its own. It skips a row whose lock, or
// whose parent's, another transaction holds (a caller's SignalTx or
// CancelTx holds one until its transaction ends), as reapSQL does: waiting
// would hold up the rest of the pass, every other expired lease with it.
// The next pass takes the row again.
func (e *engine) failReaped() {
	cfg := &e.c.cfg
	if cfg.MaxReaps <= 0 {
		return
	}
	ctx, cancel := e.dbContext()
	rows, err := e.c.pool.Query(ctx, cappedSQL, cfg.MaxReaps, reapBatch)
	var ids []int64
	if err == nil {
		ids, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	}
	cancel()
	if err != nil {
		cfg.Logger.Error("durable: reaper failed", slog.Any("error", err))
		return
	}
	for _, id := range ids {
		if e.bgCtx.Err() != nil {
			return
		}
		ctx, cancel := e.dbContext()
		failed, err := e.failReapedOne(ctx, id)
		cancel()
		switch {
		case err != nil:
			cfg.Logger.Error("durable: reaper failed", slog.Int64("id", id), slog.Any("error", err))
		case failed:
			cfg.Logger.Error("durable: instance failed: its lease expired too often",
				slog.Int64("id", id), slog.Int("max_reaps", cfg.MaxReaps))
		}
	}
}

// failReapedOne fails row id as cappedSQL found it, in the engine's lock
// order, parent first, and reports whether it did: not if either lock is
// held by another transaction, or the row changed meanwhile.
func (e *engine) failReapedOne(ctx context.Context, id int64) (failed bool, err error) {
	var (
		wake []string
		keys []string // of the row, if failed: its slot is free
	)
	err = pgx.BeginFunc(ctx, e.c.pool, func(tx pgx.Tx) error {
		var parent int64
		if err := tx.QueryRow(ctx, lockReapedParentSQL, id).Scan(&parent); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return nil // the parent is locked
			}
			return err
		}
		if err := tx.QueryRow(ctx, lockReapedSQL, id).Scan(&id); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return nil // locked, or gone
			}
			return err
		}
		b := &pgx.Batch{}
		b.Queue(failReapedSQL, id, e.c.cfg.MaxReaps, ErrReapedTooOften.Error())
		b.Queue(dropInboxSQL, id)
		b.Queue(releaseParentSQL, id)
		br := tx.SendBatch(ctx, b)
		rows, err := br.Query()
		if err == nil {
			keys, err = pgx.CollectRows(rows, pgx.RowTo[string])
		}
		failed = err == nil && len(keys) == 1
		if err == nil {
			_, err = br.Exec() // dropInboxSQL
		}
		if err == nil {
			wake, err = releasedParentQueues(br)
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		return err
	})
	failed = failed && err == nil
	if failed {
		e.committed([]int64{id}, wake) // wake, the parent it released
		if keys[0] != "" {
			e.wakeFreed(nil, keys)
		}
	}
	return failed, err
}
