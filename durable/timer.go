package durable

import "log/slog"

// dueSQL wakes up to $1 parked rows whose await deadline has passed: they
// run the awaited step with no awaited signal (Step.TimedOut).
const dueSQL = `
WITH due AS (
    SELECT id FROM durable_instance
    WHERE status = 'awaiting_signal' AND await_deadline <= now()
    ORDER BY await_deadline
    LIMIT $1
    FOR UPDATE SKIP LOCKED
)
UPDATE durable_instance i
SET status = 'runnable', eligible_at = now(), await_deadline = NULL, updated_at = now()
FROM due
WHERE i.id = due.id
RETURNING i.queue`

const dueBatch = 1000

// timer wakes parked rows past their await deadline every PollInterval.
func (e *engine) timer() {
	e.every(e.c.cfg.PollInterval, func() {
		for {
			ctx, cancel := e.dbContext()
			rows, err := e.c.pool.Query(ctx, dueSQL, dueBatch)
			if err != nil {
				cancel()
				e.c.cfg.Logger.Error("durable: await timer failed", slog.Any("error", err))
				return
			}
			n, queue, queues := 0, "", map[string]bool{}
			for rows.Next() {
				if rows.Scan(&queue) == nil {
					queues[queue] = true
				}
				n++
			}
			rows.Close()
			cancel()
			if err := rows.Err(); err != nil {
				e.c.cfg.Logger.Error("durable: await timer failed", slog.Any("error", err))
				return
			}
			e.wake(queues)
			if n < dueBatch {
				return
			}
		}
	})
}
