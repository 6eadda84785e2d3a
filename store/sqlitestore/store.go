package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/idemgo/idem"
)

// Store is the SQLite idem.Store in lease mode: every call runs on the
// *sql.DB in its own statement (Begin in its own transaction) and is
// visible to every connection and process as soon as it returns. WithTx
// gives the transactional mode.
//
// A Store is safe for concurrent use. It never closes the *sql.DB.
type Store struct {
	db    *sql.DB
	cfg   Config
	sql   queries
	batch *batcher // nil without Config.Batch
}

var _ idem.Store = (*Store)(nil)

// querier is what the store runs its statements on: the *sql.DB in lease
// mode, the caller's *sql.Tx in transactional mode, the *sql.Conn of a
// batch's transaction with Config.Batch.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// New returns a Store keeping its records in db, which must be a SQLite
// database opened with a driver registered by the caller (see the package
// documentation for the DSN). New does no I/O: run Migrate, or the SQL of
// MigrationSQL, before the first call. It fails if db is nil or cfg is invalid.
func New(db *sql.DB, cfg Config) (*Store, error) {
	if db == nil {
		return nil, errors.New("sqlitestore: New: db is nil")
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Store{db: db, cfg: cfg, sql: queryTemplates.forTable(cfg.Table)}
	if cfg.Batch {
		s.batch = &batcher{db: db, max: maxBatch}
	}
	return s, nil
}

// WithTx returns the store bound to the caller's transaction tx
// (transactional mode): every call runs its statements in tx, so a record
// appears, is settled and disappears together with the caller's own writes
// in tx. The store never begins, commits or rolls back tx; the returned
// idem.Store is valid until tx ends.
//
// SQLite admits one write transaction at a time: from the first Begin in tx
// on (its first statement takes the lock, whatever the key holds), or from
// BeginTx with _txlock=immediate, tx holds the database's write lock until
// it ends. Another transaction's Begin, of any
// key, waits for that lock (up to busy_timeout, never past its ctx), then
// answers from what tx left behind: Fresh if tx rolled back, PriorResult or
// PriorError if tx committed a settled record, InFlight if tx committed an
// unsettled one. It cannot answer InFlight while tx is still open. (A
// deferred transaction that has read cannot wait: its Begin fails at once
// with idem.ErrUnavailable; see _txlock in the package documentation.)
//
// Any error from the returned store must abort tx: a statement interrupted
// because its ctx was done makes SQLite roll back the whole transaction.
//
// Write through tx, never through the *sql.DB it came from, while tx is
// open: such a write waits for the write lock tx holds, which tx releases
// only when it ends, so it waits until busy_timeout or its context runs
// out (with a pool of one connection, SetMaxOpenConns(1), it waits for the
// connection tx holds: until its context ends, however long that is).
//
// A nil tx gives a store whose every call fails with an error satisfying
// errors.Is(err, idem.ErrInvalidArgument), and touches nothing. So does
// every call on a tx that has been committed or rolled back (with
// sql.ErrTxDone in the chain): retrying cannot help.
func (s *Store) WithTx(tx *sql.Tx) idem.Store {
	return &txStore{s: s, tx: tx}
}

// errNilTx is the error of every call of a store WithTx was given a nil
// transaction for.
var errNilTx = fmt.Errorf("sqlitestore: WithTx was given a nil *sql.Tx: %w", idem.ErrInvalidArgument)

// Begin implements idem.Store. See the package documentation for how it
// decides atomically.
func (s *Store) Begin(ctx context.Context, key idem.Key, req idem.Request, opts *idem.BeginOpts) (idem.Outcome, error) {
	if s.batch == nil {
		return s.begin(ctx, s.db, key, req, opts)
	}
	if err := idem.CheckBegin(key, req, opts, s.cfg.MaxPayload); err != nil {
		return idem.Outcome{}, err
	}
	var o idem.Outcome
	err := s.batch.do(ctx, func(ctx context.Context, q querier) (err error) {
		o, err = s.beginChecked(ctx, q, key, req, opts)
		return err
	})
	if err != nil {
		return idem.Outcome{}, err
	}
	return o, nil
}

// write runs run, a settle call or Heartbeat whose arguments the caller
// has checked, on the database or in a batch. Checking them first rejects
// invalid ones before any I/O, not after waiting for a batch.
func (s *Store) write(ctx context.Context, run func(ctx context.Context, q querier) error) error {
	if s.batch == nil {
		return run(ctx, s.db)
	}
	return s.batch.do(ctx, run)
}

// Commit implements idem.Store.
func (s *Store) Commit(ctx context.Context, key idem.Key, lease idem.Lease, result []byte) error {
	if err := s.checkCommit(key, lease, result); err != nil {
		return err
	}
	return s.write(ctx, func(ctx context.Context, q querier) error {
		return s.change(ctx, q, s.sql.commit, key, lease, string(result))
	})
}

// FailPermanent implements idem.Store.
func (s *Store) FailPermanent(ctx context.Context, key idem.Key, lease idem.Lease, e idem.StoredError) error {
	stored, err := s.encodeError(key, lease, e)
	if err != nil {
		return err
	}
	return s.write(ctx, func(ctx context.Context, q querier) error {
		return s.change(ctx, q, s.sql.failPermanent, key, lease, stored)
	})
}

// FailTransient implements idem.Store.
func (s *Store) FailTransient(ctx context.Context, key idem.Key, lease idem.Lease) error {
	if err := idem.CheckLease(key, lease); err != nil {
		return err
	}
	return s.write(ctx, func(ctx context.Context, q querier) error {
		return s.change(ctx, q, s.sql.failTransient, key, lease)
	})
}

// Heartbeat implements idem.Store.
func (s *Store) Heartbeat(ctx context.Context, key idem.Key, lease idem.Lease, extend time.Duration) (idem.Lease, error) {
	if err := idem.CheckLease(key, lease); err != nil {
		return idem.Lease{}, err
	}
	var l idem.Lease
	err := s.write(ctx, func(ctx context.Context, q querier) (err error) {
		l, err = s.extend(ctx, q, key, lease, extend)
		return err
	})
	if err != nil {
		return idem.Lease{}, err
	}
	return l, nil
}

// PurgeExpired implements idem.Store. It deletes in batches of 1000 rows,
// each batch its own statement, so that the write lock is never held
// for long. If it fails part way, the batches already deleted stay deleted
// (they held only expired records, which count as absent anyway) and the
// count returned is theirs.
func (s *Store) PurgeExpired(ctx context.Context, ns idem.Namespace, asOf time.Time) (int, error) {
	return s.purgeExpired(ctx, s.db, ns, asOf)
}

// Get implements idem.Store.
func (s *Store) Get(ctx context.Context, key idem.Key) (idem.Record, error) {
	return s.get(ctx, s.db, key)
}

// txStore is a Store bound to a caller's transaction.
type txStore struct {
	s  *Store
	tx *sql.Tx // nil: every call fails with errNilTx
}

var _ idem.TxBound = (*txStore)(nil)

// TxBound implements idem.TxBound: idem.Do and idem.KeepAlive do not extend
// the leases of a transaction-bound store.
func (t *txStore) TxBound() bool { return true }

func (t *txStore) Begin(ctx context.Context, key idem.Key, req idem.Request, opts *idem.BeginOpts) (idem.Outcome, error) {
	if t.tx == nil {
		return idem.Outcome{}, errNilTx
	}
	return t.s.begin(ctx, t.tx, key, req, opts)
}

func (t *txStore) Commit(ctx context.Context, key idem.Key, lease idem.Lease, result []byte) error {
	if t.tx == nil {
		return errNilTx
	}
	return t.s.commit(ctx, t.tx, key, lease, result)
}

func (t *txStore) FailPermanent(ctx context.Context, key idem.Key, lease idem.Lease, e idem.StoredError) error {
	if t.tx == nil {
		return errNilTx
	}
	return t.s.failPermanent(ctx, t.tx, key, lease, e)
}

func (t *txStore) FailTransient(ctx context.Context, key idem.Key, lease idem.Lease) error {
	if t.tx == nil {
		return errNilTx
	}
	return t.s.failTransient(ctx, t.tx, key, lease)
}

func (t *txStore) Heartbeat(ctx context.Context, key idem.Key, lease idem.Lease, extend time.Duration) (idem.Lease, error) {
	if t.tx == nil {
		return idem.Lease{}, errNilTx
	}
	return t.s.heartbeat(ctx, t.tx, key, lease, extend)
}

func (t *txStore) PurgeExpired(ctx context.Context, ns idem.Namespace, asOf time.Time) (int, error) {
	if t.tx == nil {
		return 0, errNilTx
	}
	return t.s.purgeExpired(ctx, t.tx, ns, asOf)
}

func (t *txStore) Get(ctx context.Context, key idem.Key) (idem.Record, error) {
	if t.tx == nil {
		return idem.Record{}, errNilTx
	}
	return t.s.get(ctx, t.tx, key)
}
