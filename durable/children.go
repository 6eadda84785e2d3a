package durable

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// KindChildren is the kind of Children: the instance waits for child
// instances. Its value is "schedule_childs", the design's name for this
// kind in the step-stop telemetry event.
const KindChildren OutcomeKind = "schedule_childs"

// Children inserts children as child instances of the instance and parks
// it in awaiting_children until every child it inserted has ended (done,
// failed or cancelled: a failed or cancelled child releases the parent
// too); then step runs, with the attempt reset to 1. The step can read the
// children's fates with Client.ChildrenOf.
//
// The children are inserted as InsertAll inserts them, in the transaction
// that commits the outcome and under the same fence: a child whose
// correlation key is occupied is dropped, and the parent waits only for
// the children actually inserted. When none is, step runs at once.
// Children that are invalid make the outcome a step error, handled by the
// FSM's error handling. It consumes the awaited signals the step saw.
func Children(step string, children ...InsertParams) Outcome {
	return Outcome{kind: KindChildren, step: step, children: children}
}

// checkChildren reports why the children of a Children outcome cannot be
// inserted.
func checkChildren(children []InsertParams, limit int) error {
	for i, p := range children {
		if _, err := newRow(p.Args, p.Opts, limit); err != nil {
			return fmt.Errorf("durable: Children[%d]: %w", i, err)
		}
	}
	return nil
}

// parkChildrenSQL is the first statement of Children: park at step $5 in
// awaiting_children, consuming the awaited signals the step saw ($7).
const parkChildrenSQL = `
WITH up AS (
    UPDATE durable_instance
    SET step = $5, state = $6, status = 'awaiting_children', attempt = 1, pending_children = 0,
        lease_owner = NULL, lease_expires_at = NULL, awaiting = NULL, await_deadline = NULL,
        error = NULL, updated_at = now()
    WHERE ` + fenceSQL + `
    RETURNING id
), consumed AS (
    DELETE FROM durable_signal WHERE instance_id IN (SELECT id FROM up) AND id = ANY($7::bigint[])
)
SELECT count(*) FROM up`

// linkChildrenSQL makes the inserted rows $2 children of $1 and sets its
// pending count; with none, the parent is runnable at once.
const linkChildrenSQL = `
WITH linked AS (
    UPDATE durable_instance SET parent_id = $1, releases_parent = true
    WHERE id = ANY($2::bigint[])
    RETURNING id
), n AS (SELECT count(*) AS n FROM linked)
UPDATE durable_instance
SET pending_children = n.n,
    status = CASE WHEN n.n = 0 THEN 'runnable' ELSE 'awaiting_children' END,
    eligible_at = now()
FROM n
WHERE id = $1
RETURNING status = 'runnable'`

// lockParentSQL is the first statement of a commit that may end a child:
// it takes the parent's row lock before the child's, the order Cancel's
// cascade takes them in, so that the two never deadlock. It waits for a
// caller's transaction that holds the parent's lock (SignalTx, CancelTx):
// the child cannot end without counting itself off its parent. It does
// not lock the child's row, so the heartbeat goes on extending the
// child's lease meanwhile, and the commit waits as long as it does (see
// commitContext).
const lockParentSQL = `
SELECT 1 FROM durable_instance
WHERE id = (SELECT parent_id FROM durable_instance WHERE id = $1 AND releases_parent)
FOR NO KEY UPDATE`

// releaseParentSQL, after the statement that ended instance $1 in the same
// transaction, decrements its parent's pending count if the child has not
// yet been counted, and makes the parent runnable when the count reaches
// zero. It runs with a fresh snapshot, under the child's row lock, so a
// child is counted exactly once. It returns the queue of the parent it
// made runnable, if it did (see releasedParentQueues), with a wake-up
// hint for the other engines.
const releaseParentSQL = `
WITH child AS (
    UPDATE durable_instance SET releases_parent = false
    WHERE id = $1 AND releases_parent AND status IN ('done', 'failed', 'cancelled')
    RETURNING parent_id
), parent AS (
    UPDATE durable_instance p
    SET pending_children = p.pending_children - 1,
        status = CASE WHEN p.pending_children = 1 AND p.status = 'awaiting_children'
                      THEN 'runnable' ELSE p.status END,
        eligible_at = CASE WHEN p.pending_children = 1 AND p.status = 'awaiting_children'
                           THEN now() ELSE p.eligible_at END,
        updated_at = now()
    FROM child
    WHERE p.id = child.parent_id
    RETURNING p.queue, p.status
)
SELECT queue, pg_notify('` + wakeupChannel + `', current_schema() || ':' || queue) FROM parent WHERE status = 'runnable'`

// releasedParentQueues reads the result of releaseParentSQL, the next in
// br: the queue of the parent it made runnable, if any, for the engine of
// this process to poke its picker at once (with Config.PollOnly, the hint
// reaches no engine).
func releasedParentQueues(br pgx.BatchResults) ([]string, error) {
	return hintedQueues(br.Query())
}

// hintedQueues reads, and closes, the result of a statement that returns
// rows of a queue and the wake-up hint sent for it (releaseParentSQL,
// keyWaitersSQL), as Query returns it: the queues.
func hintedQueues(rows pgx.Rows, err error) ([]string, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var queue string
		err := r.Scan(&queue, nil)
		return queue, err
	})
}

// lockParentByIDSQL takes, for Cancel, the lock of the parent of instance
// $1, before the instance's.
const lockParentByIDSQL = `
SELECT id FROM durable_instance
WHERE id IN (SELECT parent_id FROM durable_instance WHERE id = $1 AND releases_parent)
FOR NO KEY UPDATE`

// liveSQL is true for a row that has not ended; liveCSQL, for the rows of
// alias c.
const (
	liveSQL  = `status IN ('runnable', 'executing', 'awaiting_signal', 'awaiting_children')`
	liveISQL = `i.status IN ('runnable', 'executing', 'awaiting_signal', 'awaiting_children')`
)

// descendantsSQL is the recursive walk of every descendant of $1, with
// its depth: through ended rows too, since a child revived by Client.Retry
// can live under a child that has ended.
const descendantsSQL = `
WITH RECURSIVE tree (id, depth) AS (
    SELECT id, 1 FROM durable_instance WHERE parent_id = $1
    UNION ALL
    SELECT c.id, tree.depth + 1 FROM durable_instance c JOIN tree ON c.parent_id = tree.id
)`

// lockDescendantsSQL takes, for Cancel, the row locks of the live
// descendants of $1 (those cancelChildrenSQL cancels), in the engine's
// lock order: ancestors before descendants, here level by level from the
// top, and by ascending id within a level. Every other transaction that
// locks two rows of a tree takes a parent before its child too (a child's
// end takes lockParentSQL first; Cancel of a child, lockParentByIDSQL), so
// none can hold a child while waiting for its parent, held by the cascade,
// while the cascade waits for that child: without this order, the
// cascade's UPDATE locks rows in whatever order its plan reads them, a
// grandchild before its parent, and deadlocks with the grandchild's own
// end. Rows locked here cannot gain children before the cascade: a
// Children outcome is committed under its parent's row lock.
const lockDescendantsSQL = descendantsSQL + `
SELECT i.id FROM durable_instance i JOIN tree ON i.id = tree.id
WHERE ` + liveISQL + `
ORDER BY tree.depth, i.id
FOR NO KEY UPDATE OF i`

// cancelChildrenSQL cancels the live descendants of the cancelled instance
// $1, with reason $2 (an executing one keeps its lease, as in cancelSQL),
// deletes their inboxes and clears its pending count:
// its children need not release it any more. It follows
// lockDescendantsSQL, which locked the rows it cancels: a signal is stored
// only under its instance's row lock, so its snapshot sees every signal
// stored for them, and none can be stored until the transaction ends.
// With $3, it does so only if $1 was cancelled by this very transaction
// (a step's Cancel outcome, whose commit may have been fenced off). It
// returns the ids of the descendants it cancelled.
const cancelChildrenSQL = descendantsSQL + `, gone AS (
    UPDATE durable_instance
    SET status = 'cancelled', error = $2, finished_at = now(), releases_parent = false,
        pending_children = 0, ` + keepLeaseSQL + `, awaiting = NULL,
        await_deadline = NULL, updated_at = now()
    WHERE id IN (SELECT id FROM tree) AND ` + liveSQL + `
      AND (NOT $3::bool OR EXISTS (SELECT 1 FROM durable_instance
                                   WHERE id = $1 AND status = 'cancelled' AND finished_at = now()))
    RETURNING id
), dropped AS (
    DELETE FROM durable_signal WHERE instance_id IN (SELECT id FROM gone)
), cleared AS (
    UPDATE durable_instance SET pending_children = 0
    WHERE id = $1 AND (NOT $3::bool OR (status = 'cancelled' AND finished_at = now()))
)
SELECT id FROM gone`

// cancelledDescendants reads the result of cancelChildrenSQL, the next in
// br: the ids of the descendants it cancelled.
func cancelledDescendants(br pgx.BatchResults) ([]int64, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

// txBeginner is what commitChildren needs of the commit's database.
type txBeginner interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// commitChildren commits a Children outcome in one transaction: the fenced
// park, the inserts and the link.
func commitChildren(ctx context.Context, db dbtx, f []any, c *claimed, r ranStep, consumed []int64) (commitResult, error) {
	var res commitResult
	b, ok := db.(txBeginner)
	if !ok {
		return res, errors.New("durable: Children needs a pool")
	}
	err := pgx.BeginTxFunc(ctx, b, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		var n int64
		if err := tx.QueryRow(ctx, parkChildrenSQL, append(f, r.outcome.step, r.state, consumed)...).Scan(&n); err != nil {
			return err
		}
		if n != 1 {
			return nil // fenced off: nothing is inserted
		}
		out, err := insertAll(ctx, tx, r.outcome.children, 0) // checked against the limit by run
		if err != nil {
			return err
		}
		ids := make([]int64, 0, len(out))
		for i, o := range out {
			if !o.Duplicate {
				ids = append(ids, o.ID)
				p := r.outcome.children[i]
				res.wake = append(res.wake, queueOf(p.Args, p.Opts))
			}
		}
		if err := tx.QueryRow(ctx, linkChildrenSQL, c.id, ids).Scan(&res.runnable); err != nil {
			return err
		}
		res.committed = true
		if c.concurrencyKey == "" {
			return nil
		}
		waiters, err := hintedQueues(tx.Query(ctx, keyWaitersSQL, c.concurrencyKey, c.id))
		res.wake = append(res.wake, waiters...)
		return err
	})
	if err != nil {
		return commitResult{}, err
	}
	return res, nil
}

// Child is one child instance as ChildrenOf reads it.
type Child struct {
	ID         int64
	FSM        string
	Status     Status
	Result     json.RawMessage // Done's result; nil otherwise
	Error      string          // Stop's or Cancel's reason
	FinishedAt time.Time       // zero while live
}

const childrenOfSQL = `
SELECT id, fsm, status, result, coalesce(error, ''), finished_at
FROM durable_instance WHERE parent_id = $1 ORDER BY id`

// ChildrenOf reads the child instances of parent that have not been
// garbage collected, in id order. Children are kept while their parent is
// live.
func (c *Client) ChildrenOf(ctx context.Context, parent int64) ([]Child, error) {
	rows, err := c.pool.Query(ctx, childrenOfSQL, parent)
	if err != nil {
		return nil, fmt.Errorf("durable: ChildrenOf: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Child, error) {
		var ch Child
		var finished *time.Time
		err := r.Scan(&ch.ID, &ch.FSM, &ch.Status, &ch.Result, &ch.Error, &finished)
		if finished != nil {
			ch.FinishedAt = *finished
		}
		return ch, err
	})
	if err != nil {
		return nil, fmt.Errorf("durable: ChildrenOf: %w", err)
	}
	return out, nil
}

// lockParent takes the lock of the parent of instance id, if it is a
// child not yet counted, and returns the ids of the rows it locked.
func lockParent(ctx context.Context, tx pgx.Tx, id int64) ([]int64, error) {
	if id <= 0 {
		return nil, nil
	}
	rows, err := tx.Query(ctx, lockParentByIDSQL, id)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}
