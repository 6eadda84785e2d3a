package durable

import (
	"log/slog"
	"time"
)

// dueSQL wakes up to $1 parked rows whose await deadline has passed: they
// run the awaited step with no awaited signal (Step.TimedOut). It returns
// the queue of each row it woke (next NULL), then, if a parked row's
// deadline is still to come, a line (queue NULL) with in next the
// microseconds from the statement's now() until the earliest such
// deadline, rounded up: an index descent on durable_instance_await_deadline_idx.
// The same now() as the wake's rules out a deadline that passed between
// the two; the rows it woke had theirs passed, and are not counted.
const dueSQL = `
WITH due AS (
    SELECT id FROM durable_instance
    WHERE status = 'awaiting_signal' AND await_deadline <= now()
    ORDER BY await_deadline
    LIMIT $1
    FOR UPDATE SKIP LOCKED
), woke AS (
    UPDATE durable_instance i
    SET status = 'runnable', eligible_at = now(), await_deadline = NULL, updated_at = now()
    FROM due
    WHERE i.id = due.id
    RETURNING i.queue
)
SELECT queue, NULL::bigint AS next FROM woke
UNION ALL
SELECT NULL, ceil(extract(epoch FROM n.deadline - now()) * 1000000)::bigint
FROM (SELECT await_deadline AS deadline FROM durable_instance
      WHERE status = 'awaiting_signal' AND await_deadline > now()
      ORDER BY await_deadline
      LIMIT 1) n`

const dueBatch = 1000

// timer wakes parked rows past their await deadline: at once, then when
// the earliest deadline it knows of passes, and every PollInterval at the
// latest. It learns that deadline from its own statement (dueSQL) and
// from the Await outcomes this engine commits (engine.deadlines); a
// deadline set by another engine after this one last looked is learnt at
// its next look (that engine's timer fires it on time while it runs). Its
// one timer is moved, never doubled, and stopped with it.
func (e *engine) timer() {
	poll := e.c.cfg.PollInterval
	t := time.NewTimer(0)
	defer t.Stop()
	armed := time.Now() // when t fires
	for {
		select {
		case <-e.bgCtx.Done():
			return
		case <-e.deadlines.ch:
			if at := e.deadlines.take(); !at.IsZero() && at.Before(armed) {
				armed = at
				t.Reset(time.Until(at))
			}
			continue
		case <-t.C:
		}
		wait := poll
		if next := e.wakeDue(); next > 0 {
			wait = min(wait, next)
		}
		armed = time.Now().Add(wait)
		t.Reset(wait)
	}
}

// wakeDue wakes the parked rows past their await deadline, batch by
// batch, pokes the pickers of their queues and sends them a wake-up hint.
// It returns how long until the earliest deadline still to come, as its
// last statement saw it: 0 if there is none, or if it failed.
func (e *engine) wakeDue() time.Duration {
	for {
		ctx, cancel := e.dbContext()
		rows, err := e.c.pool.Query(ctx, dueSQL, dueBatch)
		if err != nil {
			cancel()
			e.c.cfg.Logger.Error("durable: await timer failed", slog.Any("error", err))
			return 0
		}
		n, queues, next := 0, map[string]bool{}, time.Duration(0)
		for rows.Next() {
			var queue *string
			var us *int64
			err := rows.Scan(&queue, &us)
			if err == nil && us != nil {
				next = time.Duration(*us) * time.Microsecond
				continue
			}
			if err == nil && queue != nil {
				queues[*queue] = true
			}
			n++ // a row woken, whether or not it could be read
		}
		rows.Close()
		cancel()
		if err := rows.Err(); err != nil {
			e.c.cfg.Logger.Error("durable: await timer failed", slog.Any("error", err))
			return 0
		}
		e.wake(queues)
		if n < dueBatch {
			return next
		}
	}
}
