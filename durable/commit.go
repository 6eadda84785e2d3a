package durable

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemgo/idem/internal/pgstorable"
)

// Every outcome is committed under the fence of the claim it ran under: the
// row must still be executing, leased to this engine, at the same attempt
// and claim count. A worker whose lease the reaper took back (the row is
// runnable again, or was picked again, or has moved on) matches none of
// these rows, so its commit changes nothing. The claim count is what tells
// apart two claims of one row at one attempt by one engine: after a reap,
// a new claim and a Next, the attempt is back at 1.
const fenceSQL = `id = $1 AND status = 'executing' AND lease_owner = $2 AND attempt = $3 AND claims = $4`

// nextSQL commits Next: runnable at once at step $5, attempt 1, and
// consumes the awaited signals the step saw ($7), all in one statement.
const nextSQL = `
WITH up AS (
    UPDATE durable_instance
    SET step = $5, state = $6, status = 'runnable', attempt = 1, eligible_at = now(),
        lease_owner = NULL, lease_expires_at = NULL, awaiting = NULL, await_deadline = NULL,
        error = NULL, updated_at = now()
    WHERE ` + fenceSQL + `
    RETURNING id
), consumed AS (
    DELETE FROM durable_signal WHERE instance_id IN (SELECT id FROM up) AND id = ANY($7::bigint[])
)
SELECT count(*) FROM up`

// nextPlainSQL is nextSQL for a step that saw no awaited signal: the
// common case, one plain UPDATE.
const nextPlainSQL = `
UPDATE durable_instance
SET step = $5, state = $6, status = 'runnable', attempt = 1, eligible_at = now(),
    lease_owner = NULL, lease_expires_at = NULL, awaiting = NULL, await_deadline = NULL,
    error = NULL, updated_at = now()
WHERE ` + fenceSQL

// retrySQL commits Retry: the same step after $6 microseconds, attempt + 1.
// It consumes nothing and keeps what the step awaited, so the next attempt
// sees the same signals.
const retrySQL = `
UPDATE durable_instance
SET state = $5, status = 'runnable', attempt = attempt + 1,
    eligible_at = now() + $6 * interval '1 microsecond',
    lease_owner = NULL, lease_expires_at = NULL, error = $7, updated_at = now()
WHERE ` + fenceSQL

// parkSQL is the first statement of Await: park at step $5 awaiting $7
// until $8 microseconds from now (NULL: forever), and consume the awaited
// signals the step saw ($9). Taking the row's lock here is what makes the
// wake-up check that follows see every signal committed before: a signal
// is stored only under the same lock.
const parkSQL = `
WITH up AS (
    UPDATE durable_instance
    SET step = $5, state = $6, status = 'awaiting_signal', attempt = 1,
        awaiting = $7, await_deadline = now() + $8 * interval '1 microsecond',
        lease_owner = NULL, lease_expires_at = NULL, error = NULL, updated_at = now()
    WHERE ` + fenceSQL + `
    RETURNING id
), consumed AS (
    DELETE FROM durable_signal WHERE instance_id IN (SELECT id FROM up) AND id = ANY($9::bigint[])
)
SELECT count(*) FROM up`

// wakeSQL is the second statement of Await, with a snapshot of its own:
// if a matching signal is already in the inbox, the parked row is runnable
// at once. It touches only the row this claim parked.
const wakeSQL = `
UPDATE durable_instance i
SET status = 'runnable', eligible_at = now(), await_deadline = NULL, updated_at = now()
WHERE i.id = $1 AND i.status = 'awaiting_signal' AND i.claims = $2
  AND EXISTS (SELECT 1 FROM durable_signal s WHERE s.instance_id = i.id AND s.name = ANY (i.awaiting))`

// endSQL is the first statement of Done, Stop and Cancel.
const endSQL = `
UPDATE durable_instance
SET state = $5, status = $6, result = $7, error = $8, finished_at = now(),
    lease_owner = NULL, lease_expires_at = NULL, awaiting = NULL, await_deadline = NULL,
    updated_at = now()
WHERE ` + fenceSQL

// dropInboxSQL is the second statement of Done, Stop and Cancel (and of
// Client.Cancel), with a snapshot of its own: it sees every signal stored
// before the row ended, since signals are stored only under the row's lock,
// which the first statement took. It deletes only the inbox of a terminal
// row.
const dropInboxSQL = `
DELETE FROM durable_signal
WHERE instance_id = $1
  AND EXISTS (SELECT 1 FROM durable_instance WHERE id = $1 AND status IN ('done', 'failed', 'cancelled'))`

// commitResult is what a commit did.
type commitResult struct {
	committed bool // false: fenced off, nothing changed
	runnable  bool // the row is runnable now, in its queue
	// later, when not 0, is how long after the commit the row is runnable
	// again, in its queue (a Retry with a delay): the picker's timer is
	// moved to then, with no claim.
	later time.Duration
	// parkedFor, when not 0, is how long after the commit the await
	// deadline of the row falls (an AwaitTimeout that parked it): the
	// engine's await timer is moved to then, with no query.
	parkedFor time.Duration
	// ended holds the instances the commit ended: the row, and the
	// descendants a Cancel outcome cancelled with it. Their Waits are
	// woken once the commit has returned (Client.ended).
	ended []int64
	// wake holds the queues of the other rows the commit made runnable:
	// the children a Children outcome inserted, the parent an end
	// released, the rows of the concurrency key whose slot it freed
	// (keyWaitersSQL). The engine pokes its pickers of them once the
	// commit has returned: the wake-up hints the commit sent reach no
	// engine with Config.PollOnly.
	wake []string
}

// commit commits r, the outcome of the step c ran, under c's fence. Each
// outcome is one round trip: a batch runs in one implicit transaction,
// statement by statement, each with a fresh snapshot (READ COMMITTED).
func commit(ctx context.Context, db dbtx, owner string, c *claimed, r ranStep) (commitResult, error) {
	o := r.outcome
	f := []any{c.id, owner, c.attempt, c.claims}
	r.errText = pgstorable.CleanText(r.errText) // whatever an error says, it is recorded
	consumed := make([]int64, 0, len(c.awaiting))
	for _, s := range c.awaited() {
		consumed = append(consumed, s.ID)
	}
	var res commitResult
	switch o.kind {
	case KindNext:
		sql, args, counted := nextPlainSQL, append(f, o.step, r.state), false
		if len(consumed) > 0 {
			sql, args, counted = nextSQL, append(args, consumed), true
		}
		n, waiters, err := execFreeingSlot(ctx, db, c, sql, counted, args...)
		if err != nil {
			return res, err
		}
		return commitResult{committed: n == 1, runnable: n == 1, wake: waiters}, nil

	case KindRetry:
		var errText *string
		if r.errText != "" {
			errText = &r.errText
		}
		n, waiters, err := execFreeingSlot(ctx, db, c, retrySQL, false, append(f, r.state, o.delay.Microseconds(), errText)...)
		if err != nil {
			return res, err
		}
		res := commitResult{committed: n == 1, runnable: n == 1 && o.delay == 0, wake: waiters}
		if n == 1 {
			res.later = o.delay
		}
		return res, nil

	case KindAwait:
		var deadline *int64
		if o.timeout > 0 {
			us := o.timeout.Microseconds()
			deadline = &us
		}
		b := &pgx.Batch{}
		b.Queue(parkSQL, append(f, o.step, r.state, o.signals, deadline, consumed)...)
		b.Queue(wakeSQL, c.id, c.claims)
		if c.concurrencyKey != "" {
			b.Queue(keyWaitersSQL, c.concurrencyKey, c.id)
		}
		br := db.SendBatch(ctx, b)
		defer br.Close()
		var n int64
		if err := br.QueryRow().Scan(&n); err != nil {
			return res, err
		}
		tag, err := br.Exec()
		if err != nil {
			return res, err
		}
		if c.concurrencyKey != "" {
			if res.wake, err = hintedQueues(br.Query()); err != nil { // keyWaitersSQL
				return res, err
			}
		}
		if err := br.Close(); err != nil {
			return res, err
		}
		res.committed, res.runnable = n == 1, n == 1 && tag.RowsAffected() == 1
		if res.committed && !res.runnable {
			res.parkedFor = o.timeout
		}
		return res, nil

	case KindChildren:
		return commitChildren(ctx, db, f, c, r, consumed)

	case KindDone, KindStop, KindCancel:
		status, result, errText := StatusDone, r.result, (*string)(nil)
		switch o.kind {
		case KindStop:
			status, result, errText = StatusFailed, nil, &r.errText
		case KindCancel:
			status, result, errText = StatusCancelled, nil, &r.errText
		}
		b := &pgx.Batch{}
		b.Queue(lockParentSQL, c.id)
		b.Queue(endSQL, append(f, r.state, string(status), result, errText)...)
		b.Queue(dropInboxSQL, c.id)
		b.Queue(releaseParentSQL, c.id) // a child releases its parent
		if o.kind == KindCancel {
			// As Client.Cancel: the live descendants end with it, if the
			// fenced end above was committed.
			b.Queue(lockDescendantsSQL, c.id)
			b.Queue(cancelChildrenSQL, c.id, errText, true)
		}
		if c.concurrencyKey != "" {
			b.Queue(keyWaitersSQL, c.concurrencyKey, c.id)
		}
		br := db.SendBatch(ctx, b)
		defer br.Close()
		if _, err := br.Exec(); err != nil {
			return res, err
		}
		tag, err := br.Exec()
		if err != nil {
			return res, err
		}
		res.committed = tag.RowsAffected() == 1
		if res.committed {
			res.ended = []int64{c.id}
		}
		if _, err := br.Exec(); err != nil { // dropInboxSQL
			return res, err
		}
		if res.wake, err = releasedParentQueues(br); err != nil {
			return res, err
		}
		if o.kind == KindCancel {
			if _, err := br.Exec(); err != nil { // lockDescendantsSQL
				return res, err
			}
			gone, err := cancelledDescendants(br)
			if err != nil {
				return res, err
			}
			res.ended = append(res.ended, gone...)
		}
		if c.concurrencyKey != "" {
			waiters, err := hintedQueues(br.Query()) // keyWaitersSQL
			if err != nil {
				return res, err
			}
			res.wake = append(res.wake, waiters...)
		}
		if err := br.Close(); err != nil {
			return commitResult{}, err
		}
		return res, nil
	}
	return res, errors.New("durable: commit of an invalid outcome") // run never returns one
}
