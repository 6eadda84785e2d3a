package durable

import (
	"context"
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

// check returns an ErrUnstorable error when t's key is text PostgreSQL
// cannot store: no instance carries such a key, and a statement sending
// it would fail, aborting the caller's transaction.
func (t Target) check() error { return checkText("correlation key", t.key) }

func (t Target) String() string {
	if t.key != "" {
		return fmt.Sprintf("key %q", t.key)
	}
	return fmt.Sprintf("id %d", t.id)
}

// lockByIDSQL and lockHolderSQL take the row lock of the target, the lock
// a step's commit takes too, if it is live. Locking before the signal is
// stored is what rules out a lost wake-up: an Await commit that parks the
// instance either took the lock first, and then this reads its parked row
// and wakes it, or takes it after, and then its wake-up check sees this
// signal. An ended row is not locked: nothing is written to it, and a
// caller's transaction that goes on after ErrNoTarget or ErrTerminal must
// not hold up Retry, which locks it, or the garbage collector, which skips
// locked rows. A row that ends while the statement waits for its lock is
// checked again in its newest version (READ COMMITTED) and not returned,
// but PostgreSQL leaves the row lock it took to check it with the
// transaction.
const lockByIDSQL = `
SELECT id, status, awaiting, queue FROM durable_instance WHERE id = $1 AND ` + liveSQL + `
FOR NO KEY UPDATE`

// readByIDSQL reads instance $1 without a lock, when lockByIDSQL found it
// not live; lockAnyByIDSQL locks it whatever its status.
const (
	readByIDSQL    = `SELECT id, status, awaiting, queue FROM durable_instance WHERE id = $1`
	lockAnyByIDSQL = readByIDSQL + ` FOR NO KEY UPDATE`
)

// lockHolderSQL takes the row lock of instance $1, which lookupByKeySQL
// found carrying key $2, if it still is a live instance carrying it (a
// live row with the key holds it, in its scope or with an empty scope).
// Under READ COMMITTED a row changed while the statement waited for its
// lock is checked again in its newest version: an instance that ended
// meanwhile is not returned, though its row lock stays with the
// transaction (see lockByIDSQL).
const lockHolderSQL = `
SELECT id, status, awaiting, queue FROM durable_instance
WHERE id = $1 AND correlation_key = $2 AND ` + liveSQL + `
FOR NO KEY UPDATE`

// keyTries is how many times an operation by key looks the key up when
// the instance it found ends before its lock is taken.
const keyTries = 3

// holder is the locked row of the instance a Target addresses.
type holder struct {
	id       int64
	status   Status
	awaiting []string
	queue    string
}

// lockByKey takes the row lock of the live instance that carries
// target.key and returns it. The instances carrying the key are looked up
// without locks, so that a key that several carry is answered with
// ErrAmbiguousTarget at once, whatever locks their rows are under; a key
// no live instance carries, with ErrNoTarget. The lock of the one instance
// found is taken next: if it ended meanwhile, the key is looked up again,
// up to keyTries times. op names the caller in errors.
func lockByKey(ctx context.Context, tx pgx.Tx, target Target, op string) (holder, error) {
	for range keyTries {
		id, err := lookupKey(ctx, tx, target, op)
		if err != nil {
			return holder{}, err
		}
		h, ok, err := lockHolder(ctx, tx, id, target.key, op)
		if err != nil || ok {
			return h, err
		}
	}
	return holder{}, keyChangedHands(op, target.key)
}

// keyChangedHands is the error of an operation by key whose look-up found
// an instance that had ended by the time it was locked, keyTries times.
func keyChangedHands(op, key string) error {
	return fmt.Errorf("durable: %s: correlation key %q changed hands %d times; try again", op, key, keyTries)
}

// lookupKey returns, without locking it, the id of the live instance that
// carries target.key: ErrNoTarget when none does, ErrAmbiguousTarget when
// several do. q is a transaction, or the pool (Client.Lookup).
func lookupKey(ctx context.Context, q dbtx, target Target, op string) (int64, error) {
	rows, err := q.Query(ctx, lookupByKeySQL, target.key)
	if err != nil {
		return 0, fmt.Errorf("durable: %s: %w", op, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return 0, fmt.Errorf("durable: %s: %w", op, err)
	}
	switch len(ids) {
	case 0:
		return 0, fmt.Errorf("%w: %s", ErrNoTarget, target)
	case 1:
		return ids[0], nil
	default:
		return 0, fmt.Errorf("%w: %s", ErrAmbiguousTarget, target)
	}
}

// lockHolder takes the row lock of instance id if it is still a live
// instance carrying key; ok is false if it is not.
func lockHolder(ctx context.Context, tx pgx.Tx, id int64, key, op string) (holder, bool, error) {
	return lockRow(ctx, tx, op, lockHolderSQL, id, key)
}

// lockByID returns instance id, holding its row lock if it is live; ok is
// false if it has no row. An ended instance is returned unlocked: its
// status was read after the attempt to lock it, in a newer snapshot, so an
// instance that Client.Retry made live again in between is locked then. A
// Retry racing a Signal either commits first, and the signal reaches the
// revived instance, or after, and the signal got ErrNoTarget: none is
// stored on an ended row, to turn up in the inbox of the revived one.
func lockByID(ctx context.Context, tx pgx.Tx, id int64, op string) (holder, bool, error) {
	h, ok, err := lockRow(ctx, tx, op, lockByIDSQL, id)
	if err != nil || ok {
		return h, ok, err
	}
	h, ok, err = lockRow(ctx, tx, op, readByIDSQL, id)
	if err != nil || !ok || h.status.Terminal() {
		return h, ok, err
	}
	// Revived since the first statement: lock it as it is now.
	return lockRow(ctx, tx, op, lockAnyByIDSQL, id)
}

// lockRow runs query, which returns at most one instance row (id, status,
// awaiting, queue), locked or not; ok is false if it returned none. op
// names the caller in errors.
func lockRow(ctx context.Context, tx pgx.Tx, op, query string, args ...any) (h holder, ok bool, err error) {
	err = tx.QueryRow(ctx, query, args...).Scan(&h.id, &h.status, &h.awaiting, &h.queue)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return holder{}, false, nil
	case err != nil:
		return holder{}, false, fmt.Errorf("durable: %s: %w", op, err)
	}
	return h, true, nil
}

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
// instances carry the key, a *PayloadTooLargeError when the encoded
// payload is larger than Config.MaxPayload, and an error wrapping a
// *PanicError when the payload's MarshalJSON panics; nothing is stored
// then.
//
// Addressed by key, Signal looks up the instances that carry it before it
// locks any: it answers ErrAmbiguousTarget without waiting for their row
// locks. It then waits for the lock of the one instance found; if that
// instance ends meanwhile, Signal looks the key up again and reaches the
// key's next holder, if any (ErrNoTarget otherwise). A key that changes
// hands three times during one call fails it with a plain error.
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
// child that waits is neither reaped nor run again). The lease of the
// instance's own row, though, cannot be extended while tx holds its lock:
// a step of it still running when that lease ends is cancelled (it may
// have lapsed) and runs again once tx has ended, never beside the first
// run. Keep tx short, well under Config.LeaseTTL. On an
// error tx is left usable only if the error is ErrNoTarget,
// ErrAmbiguousTarget or ErrUnstorable (an argument, or a target key,
// PostgreSQL cannot store: nothing was sent). An instance that has ended
// is not locked: after ErrNoTarget, tx does not hold up a Retry of it, or
// its garbage collection. Only an instance that ends while SignalTx waits for its row
// lock stays locked by tx, as PostgreSQL leaves that lock with the
// transaction that waited for it.
func (c *Client) SignalTx(ctx context.Context, tx pgx.Tx, target Target, name string, payload any, dedupKey string) error {
	_, err := signal(ctx, tx, target, name, payload, dedupKey, c.cfg.MaxPayload)
	return err
}

// signal stores the signal, whose payload may take up to limit bytes of
// JSON, in tx and returns the queue of the instance, if it woke it or
// found it runnable: the pickers of that queue are to be woken once tx
// commits (a wake-up hint is sent then; the caller pokes its own engine).
// A runnable instance is due already, but a picker that claimed while tx
// held its row lock skipped it (SKIP LOCKED), and nothing else would wake
// that picker before its next poll.
func signal(ctx context.Context, tx pgx.Tx, target Target, name string, payload any, dedupKey string, limit int) (string, error) {
	if name == "" {
		return "", errors.New("durable: Signal with an empty name")
	}
	if err := errors.Join(checkIndexed("signal name", name), checkIndexed("dedup key", dedupKey), target.check()); err != nil {
		return "", err
	}
	if target.key == "" && target.id <= 0 {
		return "", fmt.Errorf("durable: Signal to the zero Target: %w", ErrNoTarget)
	}
	body, err := marshalJSON(payload) // a panic of its MarshalJSON is an error
	if err != nil {
		return "", fmt.Errorf("durable: encode signal payload: %w", err)
	}
	if err := checkPayload("signal payload", body, limit); err != nil {
		return "", err
	}

	var t holder
	if target.key != "" {
		if t, err = lockByKey(ctx, tx, target, "Signal"); err != nil {
			return "", err
		}
	} else {
		var ok bool
		t, ok, err = lockByID(ctx, tx, target.id, "Signal")
		switch {
		case err != nil:
			return "", err
		case !ok || t.status.Terminal():
			return "", fmt.Errorf("%w: %s", ErrNoTarget, target)
		}
	}

	runnable := t.status == StatusRunnable
	if dedupKey != "" {
		tag, err := tx.Exec(ctx, dedupSQL, t.id, dedupKey)
		if err != nil {
			return "", fmt.Errorf("durable: Signal: %w", err)
		}
		if tag.RowsAffected() == 0 { // delivered before
			if !runnable {
				return "", nil
			}
			if _, err := tx.Exec(ctx, notifySQL, t.queue); err != nil {
				return "", fmt.Errorf("durable: Signal: %w", err)
			}
			return t.queue, nil
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
	}
	if wake || runnable {
		b.Queue(notifySQL, t.queue)
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return "", fmt.Errorf("durable: Signal: %w", err)
	}
	if wake || runnable {
		return t.queue, nil
	}
	return "", nil
}
