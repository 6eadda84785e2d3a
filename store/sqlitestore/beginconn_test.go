package sqlitestore_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"

	"modernc.org/sqlite"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
	"github.com/idemgo/idem/store/sqlitestore"
)

// cancelAtBegin is a driver.Connector over modernc.org/sqlite whose
// connections, once armed, cancel the context of the next statement equal
// to stmt as that statement completes and report the context's error,
// though the statement took effect. A driver may do just that: one that
// runs a statement while watching its context may see the context end at
// the moment the statement completes, and report the context.
type cancelAtBegin struct {
	dsn    string
	stmt   string
	armed  atomic.Bool
	cancel atomic.Pointer[context.CancelFunc]
}

func (c *cancelAtBegin) Connect(context.Context) (driver.Conn, error) {
	conn, err := (&sqlite.Driver{}).Open(c.dsn)
	if err != nil {
		return nil, err
	}
	return &cancelAtBeginConn{conn: conn, c: c}, nil
}

func (c *cancelAtBegin) Driver() driver.Driver { return &sqlite.Driver{} }

// cancelAtBeginConn forwards to the modernc.org/sqlite connection the
// interfaces database/sql looks for, with the BEGIN IMMEDIATE twist.
type cancelAtBeginConn struct {
	conn driver.Conn
	c    *cancelAtBegin
}

func (w *cancelAtBeginConn) Prepare(q string) (driver.Stmt, error) { return w.conn.Prepare(q) }
func (w *cancelAtBeginConn) Close() error                          { return w.conn.Close() }

//lint:ignore SA1019 driver.Conn requires Begin; database/sql calls BeginTx
func (w *cancelAtBeginConn) Begin() (driver.Tx, error) { return w.conn.Begin() }

func (w *cancelAtBeginConn) BeginTx(ctx context.Context, o driver.TxOptions) (driver.Tx, error) {
	return w.conn.(driver.ConnBeginTx).BeginTx(ctx, o)
}

func (w *cancelAtBeginConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	return w.conn.(driver.ConnPrepareContext).PrepareContext(ctx, q)
}

func (w *cancelAtBeginConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	return w.conn.(driver.QueryerContext).QueryContext(ctx, q, args)
}

func (w *cancelAtBeginConn) ResetSession(ctx context.Context) error {
	return w.conn.(driver.SessionResetter).ResetSession(ctx)
}

func (w *cancelAtBeginConn) IsValid() bool { return w.conn.(driver.Validator).IsValid() }

func (w *cancelAtBeginConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	r, err := w.conn.(driver.ExecerContext).ExecContext(ctx, q, args)
	if err == nil && q == w.c.stmt && w.c.armed.CompareAndSwap(true, false) {
		(*w.c.cancel.Load())()
		return nil, ctx.Err()
	}
	return r, err
}

// A lease-mode Begin whose BEGIN IMMEDIATE took effect though the driver
// reported an error (its context's, here) rolls that transaction back: its
// connection does not go back to the pool inside a transaction that holds
// the write lock, where every later call on it would fail ("cannot start a
// transaction within a transaction") or never commit, and every other
// connection's write would wait for the lock until its busy timeout.
func TestBeginRollsBackABeginReportedAsFailed(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "idem.db")
	s, o, err := beginCancelledAt(t, path, "BEGIN IMMEDIATE")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Begin = %s, %v; want context.Canceled", o.Kind, err)
	}
	ns, k, r := s.ns, s.k, s.r

	// Another connection can write (with the write lock held, its Begin
	// would fail after its busy timeout), and finds the key free.
	other := newStore(t, openDB(t, path, "?_pragma=busy_timeout(200)&_pragma=journal_mode(WAL)", 1), nil)
	mustBegin(t, other, k, r, idem.Fresh)
	// The store's own connection is usable, outside any transaction.
	mustBegin(t, s, mustKey(t, ns, "next"), r, idem.Fresh)
	mustBegin(t, other, mustKey(t, ns, "next"), r, idem.InFlight)
}

// A lease-mode Begin whose transaction committed answers what it decided,
// even when its context ends as COMMIT completes: reporting a failure
// there would leave the caller without the lease of a key its record
// says is in flight, and every retry would be told InFlight until the
// lease lapsed. COMMIT is not interrupted by the context.
func TestBeginAnswersACommittedTransaction(t *testing.T) {
	t.Parallel()
	s, o, err := beginCancelledAt(t, filepath.Join(t.TempDir(), "idem.db"), "COMMIT")
	if err != nil || o.Kind != idem.Fresh {
		t.Fatalf("Begin = %s, %v; want Fresh", o.Kind, err)
	}
	k, r := s.k, s.r
	// The lease Begin answered is the record's: it settles the key.
	if err := s.Commit(context.Background(), k, o.Lease, []byte(`{"ok":true}`)); err != nil {
		t.Fatalf("Commit with the answered lease: %v", err)
	}
	mustBegin(t, s, k, r, idem.PriorResult)
}

// cancelledBegin is the store of beginCancelledAt, with the namespace, key
// and request of its Begin.
type cancelledBegin struct {
	*sqlitestore.Store
	ns idem.Namespace
	k  idem.Key
	r  idem.Request
}

// beginCancelledAt makes a store on one connection to a database at path
// through cancelAtBegin, armed for stmt (see cancelAtBegin), and begins
// a key on it with a context that ends as stmt completes. It
// returns the store and Begin's answer.
func beginCancelledAt(t *testing.T, path, stmt string) (cancelledBegin, idem.Outcome, error) {
	t.Helper()
	conn := &cancelAtBegin{dsn: path + dsnParams, stmt: stmt}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { _ = db.Close() })
	migrate(t, db)
	ns := idemtest.RandomNamespace(t)
	s := cancelledBegin{Store: newStore(t, db, nil), ns: ns, k: mustKey(t, ns, "cancelled"), r: mustRequest(t, `{"a":1}`)}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	conn.cancel.Store(&cancel)
	conn.armed.Store(true)
	o, err := s.Begin(ctx, s.k, s.r, nil)
	if conn.armed.Load() {
		t.Fatalf("Begin sent no %s", stmt)
	}
	return s, o, err
}
