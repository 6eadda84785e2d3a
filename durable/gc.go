package durable

import "log/slog"

// gcSQL deletes up to $2 terminal rows that finished more than $1
// microseconds ago, with their inboxes and dedup keys (ON DELETE CASCADE).
// Deleting a row frees a correlation key its scope kept reserved. Children
// are kept while their parent is live. A row cancelled while its step ran
// is kept while it holds its lease, and with it its concurrency slot (see
// keepLeaseSQL): deleting it would free the slot while the step still
// runs.
const gcSQL = `
DELETE FROM durable_instance
WHERE id IN (
    SELECT id FROM durable_instance c
    WHERE status IN ('done', 'failed', 'cancelled')
      AND finished_at < now() - $1 * interval '1 microsecond'
      AND lease_owner IS NULL
      AND NOT EXISTS (SELECT 1 FROM durable_instance p WHERE p.id = c.parent_id
                      AND p.status IN ('runnable', 'executing', 'awaiting_signal', 'awaiting_children'))
    ORDER BY finished_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED)`

// bucketGCSQL deletes up to $5 rate-limit buckets idle for $4
// microseconds (GCInterval) that would be full by now: the pickers and the inserts
// treat a missing bucket as a full one, so deleting it changes nothing. A
// bucket whose name has no limit in this engine's configuration ($1–$3:
// names, tokens per second, bursts) is deleted once idle for GCRetention
// ($6 microseconds; negative: never). Locked buckets, which a picker is
// drawing from, are skipped.
const bucketGCSQL = `
DELETE FROM durable_rate_limit_bucket
WHERE key IN (
    SELECT b.key FROM durable_rate_limit_bucket b
    LEFT JOIN unnest($1::text[], $2::float8[], $3::float8[]) AS c(name, rate, burst)
           ON c.name = split_part(b.key, ':', 1)
    WHERE b.updated_at < now() - $4::bigint * interval '1 microsecond'
      AND CASE WHEN c.name IS NOT NULL
               THEN ` + bucketTokensSQL + ` >= c.burst
               ELSE $6::bigint >= 0 AND b.updated_at < now() - $6::bigint * interval '1 microsecond' END
    LIMIT $5
    FOR UPDATE OF b SKIP LOCKED)`

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
	e.collectBuckets()
	if total > 0 {
		if h := cfg.Hooks.GCSwept; h != nil {
			h(SweptEvent{Count: total})
		}
	}
}

// collectBuckets deletes the rate-limit buckets that bucketGCSQL finds,
// GCBatch per statement, so that the bucket table holds the buckets in
// use rather than one row per partition ever named.
func (e *engine) collectBuckets() {
	cfg := &e.c.cfg
	rl := newRateLimits(cfg.RateLimits)
	idle := cfg.GCInterval
	for e.bgCtx.Err() == nil {
		ctx, cancel := e.dbContext()
		tag, err := e.c.pool.Exec(ctx, bucketGCSQL, rl.names, rl.rates, rl.bursts,
			idle.Microseconds(), cfg.GCBatch, cfg.GCRetention.Microseconds())
		cancel()
		if err != nil {
			cfg.Logger.Error("durable: garbage collection of rate-limit buckets failed", slog.Any("error", err))
			return
		}
		if int(tag.RowsAffected()) < cfg.GCBatch {
			return
		}
	}
}
