package durable

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// InsertOrSignal delivers a signal to the live instance occupying
// opts.CorrelationKey or, when none does, inserts an instance of args with
// opts and delivers the signal to it, in one transaction. It returns the id
// of the instance that received the signal, and whether this call inserted
// it.
//
// Concurrent calls with one key are safe: exactly one inserts (the others
// wait for its insert to commit, then signal its instance), and each call's
// signal is delivered exactly once, subject to dedupKey as in Signal: a
// signal whose dedupKey the instance already received is not stored again,
// and InsertOrSignal still returns the instance's id.
//
// opts.CorrelationKey must be set and opts.CorrelationScope must not be
// empty (without uniqueness there is no "the" instance to signal).
// Instances inserted with the key and an empty scope carry it only as an
// address and do not occupy it: InsertOrSignal never signals them, and
// inserts beside them when no instance occupies the key (Signal by the
// key is then ambiguous while both are live). When the
// key is occupied by an ended instance (a scope holding done, failed or
// cancelled), nothing is stored and the error is a *DuplicateError carrying
// its id. The errors of Insert and Signal apply otherwise.
func (c *Client) InsertOrSignal(ctx context.Context, args Args, opts *InsertOpts, name string, payload any, dedupKey string) (id int64, inserted bool, err error) {
	var woke string
	err = pgx.BeginTxFunc(ctx, c.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) (err error) {
		id, inserted, woke, err = insertOrSignal(ctx, tx, args, opts, name, payload, dedupKey, c.cfg.MaxPayload)
		return err
	})
	if err != nil {
		return 0, false, err
	}
	if inserted {
		c.madeLocal(queueOf(args, opts), eligibleAt(opts, time.Now()))
	}
	if woke != "" {
		c.pokeLocal(woke)
	}
	return id, inserted, nil
}

// InsertOrSignalTx is InsertOrSignal in the caller's transaction, which it
// never commits or rolls back: the instance it inserts exists, and the
// signal is stored and wakes its target, only once tx commits; if tx rolls
// back, neither happened. Until then tx holds the row lock of the instance
// it signalled, or the key of the instance it inserted, so that concurrent
// calls with the key wait for tx to end.
//
// tx must be READ COMMITTED (PostgreSQL's default): each of its statements
// must see the instances other transactions committed meanwhile, to find
// the instance whose insert its own insert waited for. Its errors are
// InsertOrSignal's. On an error InsertOrSignalTx has stored nothing in tx,
// which stays usable unless the error came from the database: then tx must
// be rolled back.
func (c *Client) InsertOrSignalTx(ctx context.Context, tx pgx.Tx, args Args, opts *InsertOpts, name string, payload any, dedupKey string) (id int64, inserted bool, err error) {
	id, inserted, _, err = insertOrSignal(ctx, tx, args, opts, name, payload, dedupKey, c.cfg.MaxPayload)
	if err != nil {
		return 0, false, err
	}
	return id, inserted, nil
}

// lockOccupantSQL takes the row lock of the live instance occupying key
// $1, if one does. Instances that carry the key only as an address (an
// empty scope, no guard) do not occupy it.
const lockOccupantSQL = `
SELECT id FROM durable_instance WHERE correlation_guard = $1 AND ` + liveSQL + `
FOR NO KEY UPDATE`

// insertOrSignal runs in tx, which must be READ COMMITTED: each try's
// statements see the rows committed before they started, so a conflicting
// insert, which waits for the occupant's transaction to end, is followed by
// a signal that finds the occupant.
func insertOrSignal(ctx context.Context, tx pgx.Tx, args Args, opts *InsertOpts, name string, payload any, dedupKey string, limit int) (id int64, inserted bool, woke string, err error) {
	if opts == nil || opts.CorrelationKey == "" {
		return 0, false, "", errors.New("durable: InsertOrSignal without InsertOpts.CorrelationKey")
	}
	if opts.CorrelationScope != nil && len(opts.CorrelationScope) == 0 {
		return 0, false, "", errors.New("durable: InsertOrSignal with an empty InsertOpts.CorrelationScope: the key must be unique")
	}
	r, err := newRow(args, opts, limit)
	if err != nil {
		return 0, false, "", err
	}
	// The signal is checked before anything is written, so that an insert
	// is never left in tx without its signal.
	if name == "" {
		return 0, false, "", errors.New("durable: InsertOrSignal with an empty signal name")
	}
	if err := errors.Join(checkIndexed("signal name", name), checkIndexed("dedup key", dedupKey)); err != nil {
		return 0, false, "", err
	}
	body, err := marshalJSON(payload) // a panic of its MarshalJSON is an error
	if err != nil {
		return 0, false, "", fmt.Errorf("durable: encode signal payload: %w", err)
	}
	if err := checkPayload("signal payload", body, limit); err != nil {
		return 0, false, "", err
	}
	key := opts.CorrelationKey
	// Each try either signals the occupant, inserts, or sees the key
	// change hands; three changes in a row are a key too busy to settle.
	for range 3 {
		var id int64
		switch err := tx.QueryRow(ctx, lockOccupantSQL, key).Scan(&id); {
		case err == nil:
			woke, err := signal(ctx, tx, ByID(id), name, payload, dedupKey, limit)
			return id, false, woke, err
		case !errors.Is(err, pgx.ErrNoRows):
			return 0, false, "", fmt.Errorf("durable: InsertOrSignal: %w", err)
		}
		id, occupant, err := tryInsert(ctx, tx, r)
		if err != nil {
			return 0, false, "", fmt.Errorf("durable: InsertOrSignal: %w", err)
		}
		if id != 0 {
			woke, err := signal(ctx, tx, ByID(id), name, payload, dedupKey, limit)
			return id, true, woke, err
		}
		if occupant == 0 {
			continue // the occupant left the key before the look-up
		}
		woke, err := signal(ctx, tx, ByID(occupant), name, payload, dedupKey, limit)
		switch {
		case err == nil:
			return occupant, false, woke, nil
		case !errors.Is(err, ErrNoTarget):
			return 0, false, "", err
		}
		// The occupant has ended: either it holds the key in its scope
		// (a duplicate), or it ended after the insert conflicted.
		if _, err := lockLive(ctx, tx, ByID(occupant), "InsertOrSignal"); errors.Is(err, ErrTerminal) {
			var guard *string
			if err := tx.QueryRow(ctx, `SELECT correlation_guard FROM durable_instance WHERE id = $1`, occupant).Scan(&guard); err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return 0, false, "", fmt.Errorf("durable: InsertOrSignal: %w", err)
			}
			if guard != nil {
				return 0, false, "", &DuplicateError{CorrelationKey: key, ID: occupant}
			}
		}
	}
	return 0, false, "", fmt.Errorf("durable: InsertOrSignal: correlation key %q changed hands three times; try again", key)
}
