package pgstore

import (
	"context"
	"github.com/jackc/pgx/v5"
	"time"

	"github.com/idemgo/idem"
	"github.com/jackc/pgx/v5/pgtype"
)

// maxBeginAttempts bounds how often Begin runs its statement. A second
// run is needed only when another writer changed the key between the
// statement's snapshot and its write; a third almost never.
const maxBeginAttempts = 4

// Begin implements idem.Store.
func (b binding) Begin(ctx context.Context, key idem.Key, req idem.Request, opts *idem.BeginOpts) (idem.Outcome, error) {
	if b.q == nil { // first: the zero Store has no configuration to check with
		return idem.Outcome{}, b.noQuerier()
	}
	cfg := &b.s.cfg
	if err := idem.CheckBegin(key, req, opts, cfg.MaxPayload); err != nil {
		return idem.Outcome{}, err
	}
	payload := req.RecordedPayload()
	if err := checkJSONB("request", payload, cfg.MaxPayload); err != nil { // after CheckBegin's JSON and UTF-8 checks
		return idem.Outcome{}, err
	}
	if err := ctx.Err(); err != nil {
		return idem.Outcome{}, ctxError("Begin", err, nil)
	}
	retention, leaseTTL := opts.Durations(cfg.Retention, cfg.Lease)
	ns, scope, value := keyArgs(key)
	r := newBeginRow()
	// The payload goes as text (see jsonArg).
	r.args = [10]any{ns, scope, value, req.Fingerprint.Bytes(), jsonArg(payload), nil, nil, nil, nil, lockText(b.s.table, key)}
	for range maxBeginAttempts {
		now := b.now()
		token := idem.NewToken()
		leaseEnd := after(now, leaseTTL)
		expires := after(now, retention)
		if leaseEnd.After(expires) { // the record lives at least as long as its lease
			expires = leaseEnd
		}
		r.args[5], r.args[6], r.args[7], r.args[8] = now, expires, leaseEnd, token
		var err error
		if b.tx {
			err = b.queryUnderSavepoint(ctx, r)
		} else if p, ok := b.q.(*pipeline); ok {
			// Made only if the call queues: a direct one needs none, and
			// pays no allocation for it.
			orphan := func() orphanFunc { return b.releaseOrphan(ctx, key, token, leaseEnd, leaseTTL) }
			err = p.queryRowOrphan(ctx, b.s.sql.begin, r.args[:], orphan, r.dest[:]...)
		} else {
			err = b.q.queryRow(ctx, b.s.sql.begin, r.args[:], r.dest[:]...)
		}
		if b.retryable(ctx, err) {
			continue // another writer changed the key: look again
		}
		if err != nil {
			// The caller's transaction is aborted, savepoint and all.
			return idem.Outcome{}, classify(ctx, "Begin", err)
		}
		if b.tx && r.got.Bool && !r.newFence.Valid {
			if err := b.undoSavepoint(ctx); err != nil {
				return idem.Outcome{}, classify(ctx, "Begin", err)
			}
		}
		if r.newFence.Valid {
			// Created (fence 1) or taken over: the caller owns the key. A
			// takeover replaced a live record whose lease had lapsed; a
			// record that was expired as a whole counts as absent.
			takenOver := r.status.String == string(idem.StatusInProgress) && r.expires.Time.After(now)
			return idem.Outcome{
				Kind:      idem.Fresh,
				Lease:     idem.Lease{Token: token, Fence: r.newFence.Int64, ExpiresAt: leaseEnd, TTL: leaseTTL},
				TakenOver: takenOver,
			}, nil
		}
		locked := r.got.Valid && !r.got.Bool // another transaction is writing the key
		if r.status.Valid && r.expires.Time.After(now) {
			rec, err := record(key, r.status.String, r.hash, r.recReq, r.recRes, r.recErr, r.curFence.Int64, r.created, r.expires, r.curLeaseEnd)
			if err != nil {
				return idem.Outcome{}, corruptError("Begin", "record", err)
			}
			o, takeover := idem.Decide(&rec, req.Fingerprint, now)
			if !takeover {
				return o, nil
			}
		}
		if locked {
			// The writer holds the key now, or will once its transaction
			// commits; its lease will be about as long as ours.
			return idem.Outcome{Kind: idem.InFlight, RetryAfter: cfg.Lease}, nil
		}
		// The record changed after the statement's snapshot was taken
		// (created, deleted or taken over by another writer): look again.
	}
	// Other writers keep changing the key: it is in flight, briefly.
	return idem.Outcome{Kind: idem.InFlight, RetryAfter: time.Second}, nil
}

// beginSavepoint is the savepoint under which a transactional Begin runs
// its statement.
const beginSavepoint = "pgstore_begin"

// queryUnderSavepoint runs the Begin statement of r in the caller's
// transaction under a new savepoint, beginSavepoint: both in one round
// trip on a pgx transaction, in two on a database/sql one. The savepoint
// is left open when the statement holds nothing it should not (it ends
// with the transaction, or with a savepoint of the caller's around it);
// see undoSavepoint for when it is not.
func (b binding) queryUnderSavepoint(ctx context.Context, r *beginRow) error {
	if q, ok := b.q.(pgxQuerier); ok {
		if tx, ok := q.db.(pgxBatcher); ok {
			var batch pgx.Batch
			batch.Queue("SAVEPOINT " + beginSavepoint)
			batch.Queue(b.s.sql.begin, r.args[:]...)
			res := tx.SendBatch(ctx, &batch)
			_, err := res.Exec()
			if err == nil {
				err = res.QueryRow().Scan(r.dest[:]...)
			}
			if cerr := res.Close(); err == nil {
				err = cerr
			}
			return err
		}
	}
	if _, err := b.q.exec(ctx, "SAVEPOINT "+beginSavepoint); err != nil {
		return err
	}
	return b.q.queryRow(ctx, b.s.sql.begin, r.args[:], r.dest[:]...)
}

// pgxBatcher is what a pgx transaction has for sending statements
// together.
type pgxBatcher interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// undoSavepoint rolls a transactional Begin back to its savepoint, for a
// statement that took the key's advisory lock to write and did not write:
// another writer, which takes no lock (a lease-mode Heartbeat), or a row
// committed after the statement's snapshot, got there first. The
// statement then also holds a row lock on the record when its UPDATE
// waited for the row and found its condition no longer held. Rolled back,
// it keeps neither until the caller's transaction ends, so that the key is
// not held in flight for others, nor its owner's settle kept waiting, by a
// Begin that does not own it. It runs whatever ctx does: what Begin
// answers must be what the transaction holds.
func (b binding) undoSavepoint(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelGrace)
	defer cancel()
	_, err := b.q.exec(ctx, "ROLLBACK TO SAVEPOINT "+beginSavepoint+"; RELEASE SAVEPOINT "+beginSavepoint)
	return err
}

// releaseOrphan returns what a pipelined Begin's statement does with its
// answer when its caller left (ctx ended) after it was sent: if the
// statement reserved the key, under a lease only the store knows (token,
// and the fence in the answer), it releases the reservation, as
// FailTransient would, so that the key is not held in flight until a
// lease nobody holds lapses. The release runs in its own goroutine, with
// ctx's values, until it is done or the lease ends, counted for Drain.
func (b binding) releaseOrphan(ctx context.Context, key idem.Key, token string, leaseEnd time.Time, ttl time.Duration) orphanFunc {
	return func(scan func(dest ...any) error) {
		r := newBeginRow()
		if scan(r.dest[:]...) != nil || !r.newFence.Valid {
			return // nothing reserved
		}
		lease := idem.Lease{Token: token, Fence: r.newFence.Int64, ExpiresAt: leaseEnd, TTL: ttl}
		b.s.left.Add() // while the call that found the reservation still counts
		go func() {
			defer b.s.left.Done()
			rctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), leaseEnd)
			defer cancel()
			_ = b.FailTransient(rctx, key, lease)
		}()
	}
}

// beginRow holds the arguments of Begin's statement and the columns of
// its row, scanned in place: one allocation instead of one per column.
// pgtype's nullable types scan without database/sql's conversions on pgx,
// and are sql.Scanners for database/sql.
type beginRow struct {
	args [10]any
	dest [11]any

	got                           pgtype.Bool
	newFence, curFence            pgtype.Int8
	status                        pgtype.Text
	hash, recReq, recRes, recErr  []byte
	created, expires, curLeaseEnd pgtype.Timestamptz
}

func newBeginRow() *beginRow {
	r := new(beginRow)
	r.dest = [11]any{&r.got, &r.newFence, &r.status, &r.hash, &r.recReq, &r.recRes, &r.recErr,
		&r.curFence, &r.created, &r.expires, &r.curLeaseEnd}
	return r
}

// record builds an idem.Record from stored columns.
func record(key idem.Key, status string, hash, reqPayload, result, errPayload []byte, fence int64, created, expires, leaseEnd pgtype.Timestamptz) (idem.Record, error) {
	fp, err := idem.ParseFingerprint(hash)
	if err != nil {
		return idem.Record{}, err
	}
	rec := idem.Record{
		Key:         key,
		Status:      idem.Status(status),
		Fingerprint: fp,
		Request:     reqPayload,
		Result:      result,
		Fence:       fence,
		CreatedAt:   created.Time,
		ExpiresAt:   expires.Time,
	}
	if leaseEnd.Valid {
		rec.LeaseExpiresAt = leaseEnd.Time
	}
	if errPayload != nil {
		if rec.Error, err = decodeError(errPayload); err != nil {
			return idem.Record{}, err
		}
	}
	return rec, nil
}
