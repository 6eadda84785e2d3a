package durable

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
)

// Target addresses a signal: an instance's id, or the correlation key it
// occupies. Make one with ByID or ByKey.
type Target struct {
	id  int64
	key string
}

// ByID addresses the instance with id.
func ByID(id int64) Target { return Target{id: id} }

// ByKey addresses the live instance that carries key as its correlation
// key. With the default scope, and any scope but the empty one, at most one
// live instance occupies a key. Instances inserted with an empty scope
// carry their key without uniqueness; addressing them by key works while
// exactly one live instance carries it.
func ByKey(key string) Target { return Target{key: key} }

func (t Target) String() string {
	if t.key != "" {
		return fmt.Sprintf("key %q", t.key)
	}
	return fmt.Sprintf("id %d", t.id)
}

// lockByIDSQL and lockByKeySQL find the target and take its row lock, the
// lock a step's commit takes too. Locking before the signal is stored is
// what rules out a lost wake-up: an Await commit that parks the instance
// either took the lock first, and then this reads its parked row and wakes
// it, or takes it after, and then its wake-up check sees this signal.
const lockByIDSQL = `
SELECT id, status, awaiting, queue FROM durable_instance WHERE id = $1 FOR NO KEY UPDATE`

const lockByKeySQL = `
SELECT id, status, awaiting, queue FROM durable_instance
WHERE id IN (SELECT id FROM durable_instance WHERE correlation_guard = $1
             UNION ALL
             SELECT id FROM durable_instance
             WHERE correlation_key = $1 AND cardinality(correlation_scope) = 0)
  AND status IN ('runnable', 'executing', 'awaiting_signal', 'awaiting_children')
LIMIT 2
FOR NO KEY UPDATE`

const dedupSQL = `
INSERT INTO durable_signal_dedup (instance_id, dedup_key) VALUES ($1, $2) ON CONFLICT DO NOTHING`

const storeSignalSQL = `
INSERT INTO durable_signal (instance_id, name, payload, dedup_key) VALUES ($1, $2, $3, $4)`

// wakeOnSignalSQL makes a parked instance runnable when the signal's name
// is one it awaits.
const wakeOnSignalSQL = `
UPDATE durable_instance
SET status = 'runnable', eligible_at = now(), await_deadline = NULL, updated_at = now()
WHERE id = $1 AND status = 'awaiting_signal' AND $2 = ANY (awaiting)`

// Signal stores a signal named name with payload (encoded as JSON; nil is
// JSON null) in the inbox of the instance target addresses, and wakes the
// instance if it awaits that name. Signals of other names wait in the inbox
// for an Await that names them. A signal stored while a step of the
// instance runs is not among the signals that step sees, and its outcome
// does not consume it: it waits for a later step, unless that outcome
// ends the instance (Done, Stop, Cancel), which deletes the whole inbox.
//
// A non-empty dedupKey makes delivery idempotent per instance: a signal
// whose dedupKey the instance already received is not stored again, even
// after the first was consumed, for as long as the instance's row exists;
// Signal then returns nil. An empty dedupKey stores every call.
//
// It returns ErrNoTarget when the target does not exist, is terminal, or is
// a key no live instance occupies, ErrAmbiguousTarget when several live
// instances carry the key, and a *PayloadTooLargeError when the encoded
// payload is larger than Config.MaxPayload; nothing is stored then.
func (c *Client) Signal(ctx context.Context, target Target, name string, payload any, dedupKey string) error {
	var woke string
	err := pgx.BeginTxFunc(ctx, c.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) (err error) {
		woke, err = signal(ctx, tx, target, name, payload, dedupKey, c.cfg.MaxPayload)
		return err
	})
	if err == nil && woke != "" {
		c.pokeLocal(woke)
	}
	return err
}

// SignalTx is Signal in the caller's transaction, which it never commits or
// rolls back: the signal is stored, and wakes the instance, only once tx
// commits. Until then tx holds the instance's row lock, so its next step
// cannot commit, and neither can the end of any child of it: a child's end
// counts itself off its parent in the transaction that ends it, under the
// parent's row lock. Such commits wait for tx, each holding a worker of
// its queue and a connection, while the engine keeps their leases (a
// child that waits is neither reaped nor run again): keep tx short. On an
// error tx is left usable only if the error is ErrNoTarget or
// ErrAmbiguousTarget.
func (c *Client) SignalTx(ctx context.Context, tx pgx.Tx, target Target, name string, payload any, dedupKey string) error {
	_, err := signal(ctx, tx, target, name, payload, dedupKey, c.cfg.MaxPayload)
	return err
}

// signal stores the signal, whose payload may take up to limit bytes of
// JSON, in tx and returns the queue of the instance it woke, if it woke
// one.
func signal(ctx context.Context, tx pgx.Tx, target Target, name string, payload any, dedupKey string, limit int) (string, error) {
	if name == "" {
		return "", errors.New("durable: Signal with an empty name")
	}
	if err := errors.Join(checkText("signal name", name), checkText("dedup key", dedupKey)); err != nil {
		return "", err
	}
	if target.key == "" && target.id <= 0 {
		return "", fmt.Errorf("durable: Signal to the zero Target: %w", ErrNoTarget)
	}
	body, err := json.Marshal(payload)
	if err != nil {
		return "", fmt.Errorf("durable: encode signal payload: %w", err)
	}
	if err := checkPayload("signal payload", body, limit); err != nil {
		return "", err
	}

	var rows pgx.Rows
	if target.key != "" {
		rows, err = tx.Query(ctx, lockByKeySQL, target.key)
	} else {
		rows, err = tx.Query(ctx, lockByIDSQL, target.id)
	}
	if err != nil {
		return "", fmt.Errorf("durable: Signal: %w", err)
	}
	type found struct {
		id       int64
		status   Status
		awaiting []string
		queue    string
	}
	targets, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (found, error) {
		var f found
		err := r.Scan(&f.id, &f.status, &f.awaiting, &f.queue)
		return f, err
	})
	if err != nil {
		return "", fmt.Errorf("durable: Signal: %w", err)
	}
	switch {
	case len(targets) == 0 || targets[0].status.Terminal():
		return "", fmt.Errorf("%w: %s", ErrNoTarget, target)
	case len(targets) > 1:
		return "", fmt.Errorf("%w: %s", ErrAmbiguousTarget, target)
	}
	t := targets[0]

	if dedupKey != "" {
		tag, err := tx.Exec(ctx, dedupSQL, t.id, dedupKey)
		if err != nil {
			return "", fmt.Errorf("durable: Signal: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return "", nil // delivered before
		}
	}
	var dk *string
	if dedupKey != "" {
		dk = &dedupKey
	}
	wake := t.status == StatusAwaitingSignal && slices.Contains(t.awaiting, name)
	b := &pgx.Batch{}
	b.Queue(storeSignalSQL, t.id, name, body, dk)
	if wake {
		b.Queue(wakeOnSignalSQL, t.id, name)
		b.Queue(notifySQL, t.queue)
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return "", fmt.Errorf("durable: Signal: %w", err)
	}
	if wake {
		return t.queue, nil
	}
	return "", nil
}
