package sqlitestore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"

	"github.com/idemgo/idem"
)

// begin is Store.Begin on q. On the *sql.DB (lease mode) it runs in a
// transaction of its own, committed before it returns; in a transaction
// (the caller's *sql.Tx in transactional mode, the *sql.Conn of a batch's
// with Config.Batch) it runs in that transaction, taking the write lock
// first if the transaction does not hold it yet. Invalid arguments are
// rejected before any I/O.
func (s *Store) begin(ctx context.Context, q querier, key idem.Key, req idem.Request, opts *idem.BeginOpts) (idem.Outcome, error) {
	if err := idem.CheckBegin(key, req, opts, s.cfg.MaxPayload); err != nil {
		return idem.Outcome{}, err
	}
	return s.beginChecked(ctx, q, key, req, opts)
}

// beginChecked is begin with its arguments checked.
func (s *Store) beginChecked(ctx context.Context, q querier, key idem.Key, req idem.Request, opts *idem.BeginOpts) (idem.Outcome, error) {
	if err := ctx.Err(); err != nil {
		return idem.Outcome{}, err
	}
	if db, ok := q.(*sql.DB); ok {
		return s.beginOwnTx(ctx, db, key, req, opts)
	}
	if !holdsWriteLock(q) {
		if _, err := q.ExecContext(ctx, s.sql.lock); err != nil {
			return idem.Outcome{}, dbError(ctx, err)
		}
	}
	return s.beginLocked(ctx, q, key, req, opts)
}

// beginOwnTx runs beginLocked in a transaction of its own on one of db's
// connections. It sends BEGIN IMMEDIATE itself, which takes the write lock
// whatever the DSN's _txlock says, rather than use db.BeginTx, which would
// need the lock statement too and costs a goroutine per call. The
// transaction is rolled back unless it committed (on a panic too), and a
// connection whose ROLLBACK fails is discarded, not returned to the pool in
// a transaction. (ROLLBACK also fails when SQLite already ended the
// transaction, as it does when a statement in it is interrupted.)
//
// A failed BEGIN IMMEDIATE is rolled back too: a driver may report an error
// for a BEGIN that took effect (the ctx's, when ctx ended as the statement
// completed), and a connection left in that transaction would hold the
// write lock in the pool. When no transaction was started, ROLLBACK fails
// and the connection is discarded. COMMIT, once sent, runs to its end
// whatever ctx does: Begin answers what it wrote.
func (s *Store) beginOwnTx(ctx context.Context, db *sql.DB, key idem.Key, req idem.Request, opts *idem.BeginOpts) (idem.Outcome, error) {
	conn, err := beginImmediate(ctx, db)
	if err != nil {
		return idem.Outcome{}, dbError(ctx, err)
	}
	committed := false
	defer func() {
		if committed {
			_ = conn.Close()
		} else {
			rollback(context.WithoutCancel(ctx), conn)
		}
	}()
	o, err := s.beginLocked(ctx, conn, key, req, opts)
	if err != nil {
		return idem.Outcome{}, err
	}
	// COMMIT is not interrupted by ctx: a driver may report ctx's end for
	// a COMMIT that took effect, and Begin would then report a failure for
	// a record it wrote, leaving the key in flight with a lease nobody
	// holds. With the write lock held it has nothing to wait for.
	if _, err := conn.ExecContext(context.WithoutCancel(ctx), "COMMIT"); err != nil {
		return idem.Outcome{}, dbError(ctx, err)
	}
	committed = true
	return o, nil
}

// beginImmediate takes a connection of db and starts a transaction on it
// with BEGIN IMMEDIATE. A BEGIN that fails is rolled back (see beginOwnTx)
// and its connection handed back.
func beginImmediate(ctx context.Context, db *sql.DB) (*sql.Conn, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		rollback(context.WithoutCancel(ctx), conn)
		return nil, err
	}
	return conn, nil
}

// rollback ends the transaction on conn, if any, and hands conn back to the
// pool. A connection whose ROLLBACK fails, as it does when SQLite has
// already ended the transaction or none was started, is discarded, never
// returned to the pool inside a transaction holding the write lock.
func rollback(ctx context.Context, conn *sql.Conn) {
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	}
	_ = conn.Close()
}

// beginLocked decides Begin in q, a transaction that holds SQLite's write
// lock until it ends. Only now is the clock read: a Begin that waited for
// the lock (behind another connection's transaction, up to busy_timeout)
// or for a connection of the pool grants a full lease from the time it
// holds the lock, and judges the record it finds at that time. Then, with
// no other writer able to change the record in between:
//
//  1. insert: a key without a record gets one, and the answer is Fresh.
//  2. read: the record is decided by idem.Decide, exactly as memstore does.
//     Replays, Mismatch and InFlight are answered from this read and write
//     nothing.
//  3. replace (the record has expired) or takeover (in progress, same
//     request, lease lapsed): an UPDATE conditioned on what the read saw.
func (s *Store) beginLocked(ctx context.Context, q querier, key idem.Key, req idem.Request, opts *idem.BeginOpts) (idem.Outcome, error) {
	retention, leaseTTL := opts.Durations(s.cfg.Retention, s.cfg.Lease)
	payload := req.RecordedPayload()
	clock := s.cfg.Now()
	now := clock.UnixMicro()
	token := idem.NewToken()
	leaseExpires := after(clock, leaseTTL)
	args := []any{
		string(key.Namespace()), key.Scope(), key.Value(), // ?1 ?2 ?3
		req.Fingerprint.Bytes(), string(payload), token, // ?4 ?5 ?6
		now, max(after(clock, retention), leaseExpires), leaseExpires, // ?7 ?8 ?9: the record lives at least as long as its lease
	}
	fresh := func(fence int64, takenOver bool) idem.Outcome {
		return idem.Outcome{
			Kind:      idem.Fresh,
			Lease:     idem.Lease{Token: token, Fence: fence, ExpiresAt: timeOf(leaseExpires), TTL: leaseTTL},
			TakenOver: takenOver,
		}
	}

	res, err := q.ExecContext(ctx, s.sql.insert, args...)
	if err != nil {
		return idem.Outcome{}, dbError(ctx, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return idem.Outcome{}, dbError(ctx, err)
	}
	if n == 1 {
		return fresh(1, false), nil
	}

	stored, err := scanRow(q.QueryRowContext(ctx, s.sql.read, args[:3]...))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return idem.Outcome{}, idem.Unavailable(errChanged)
	case err != nil:
		return idem.Outcome{}, dbError(ctx, err)
	}

	// An expired record counts as absent whatever it holds, so it is
	// decoded only when live: a row that does not decode blocks its key
	// (ErrUnavailable) until it expires, not for good.
	reserve, takeover := s.sql.replace, false
	if now < stored.expires {
		rec, err := stored.record(key)
		if err != nil {
			return idem.Outcome{}, readError(ctx, err)
		}
		o, t := idem.Decide(&rec, req.Fingerprint, timeOf(now))
		if !t {
			return o, nil
		}
		reserve, takeover = s.sql.takeover, true
	}
	var fence int64
	err = q.QueryRowContext(ctx, reserve, args...).Scan(&fence)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return idem.Outcome{}, idem.Unavailable(errChanged)
	case err != nil:
		return idem.Outcome{}, dbError(ctx, err)
	}
	return fresh(fence, takeover), nil
}

// readError maps an error of scanRecord: corruption is an unavailable
// store whatever ctx says, anything else is a database failure.
func readError(ctx context.Context, err error) error {
	var corrupt *corruptError
	if errors.As(err, &corrupt) {
		return idem.Unavailable(err)
	}
	return dbError(ctx, err)
}
