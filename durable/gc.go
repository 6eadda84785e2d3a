package durable

import "log/slog"

// gcSQL deletes up to $2 terminal rows that finished more than $1
// microseconds ago, with their inboxes and dedup keys (ON DELETE CASCADE).
// Deleting a row frees a correlation key its scope kept reserved. Children
// are kept while their parent is live.
const gcSQL = `
DELETE FROM durable_instance
WHERE id IN (
    SELECT id FROM durable_instance c
    WHERE status IN ('done', 'failed', 'cancelled')
      AND finished_at < now() - $1 * interval '1 microsecond'
      AND NOT EXISTS (SELECT 1 FROM durable_instance p WHERE p.id = c.parent_id
                      AND p.status IN ('runnable', 'executing', 'awaiting_signal', 'awaiting_children'))
    ORDER BY finished_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED)`

// collect deletes terminal rows past GCRetention every GCInterval, GCBatch
// rows per statement.
func (e *engine) collect() {
	e.every(e.c.cfg.GCInterval, e.collectOnce)
}

func (e *engine) collectOnce() {
	cfg := &e.c.cfg
	total := 0
	for {
		ctx, cancel := e.dbContext()
		tag, err := e.c.pool.Exec(ctx, gcSQL, cfg.GCRetention.Microseconds(), cfg.GCBatch)
		cancel()
		if err != nil {
			cfg.Logger.Error("durable: garbage collection failed", slog.Any("error", err))
			break
		}
		n := int(tag.RowsAffected())
		total += n
		if n < cfg.GCBatch || e.bgCtx.Err() != nil {
			break
		}
	}
	if total > 0 {
		if h := cfg.Hooks.GCSwept; h != nil {
			h(SweptEvent{Count: total})
		}
	}
}
