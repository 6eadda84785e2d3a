// Package txfake is a fake database transaction for tests of the HTTP
// middleware's transaction mode (idemhttp.Config.BeginTx) through the
// framework adapters: each request's Tx records its Commit and Rollback
// calls, and checks at Commit that nothing has reached the client yet;
// its store is a memstore bound to it, as pgstore's WithTx is to a pgx.Tx.
package txfake

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/store/memstore"
)

// ValueKey is the context key under which BeginTx puts the request's *Tx,
// as a program puts its *sql.Tx or pgx.Tx there.
type ValueKey struct{}

// Tx is a database transaction standing in for a real one.
type Tx struct {
	mu        sync.Mutex
	commits   int
	rollbacks int
	early     []string // what the client had been sent when Commit was called
	begun     *idem.Key
	lease     idem.Lease
	record    func(context.Context) error // the record written in the transaction, applied at Commit
}

// Calls is tx's Commit and Rollback calls, and what the client had been
// sent at the Commit.
func (tx *Tx) Calls() (commits, rollbacks int, early []string) {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	return tx.commits, tx.rollbacks, tx.early
}

// WantEnded fails tb, naming the transaction as what, unless Commit was
// called commits times and Rollback rollbacks times.
func (tx *Tx) WantEnded(tb testing.TB, what string, commits, rollbacks int) {
	tb.Helper()
	if c, r, _ := tx.Calls(); c != commits || r != rollbacks {
		tb.Errorf("%s: Commit called %d times, Rollback %d, want %d and %d", what, c, r, commits, rollbacks)
	}
}

// boundStore is a memstore bound to a Tx: the record its Commit writes
// reaches the memstore only when the transaction commits, and the key its
// Begin leased is released when the transaction rolls back or fails to
// commit, as a real transaction's end keeps or undoes the Begin's and the
// Commit's rows.
type boundStore struct {
	idem.Store
	tx *Tx
}

func (s boundStore) Begin(ctx context.Context, k idem.Key, r idem.Request, o *idem.BeginOpts) (idem.Outcome, error) {
	out, err := s.Store.Begin(ctx, k, r, o)
	if err == nil && out.Kind == idem.Fresh {
		s.tx.mu.Lock()
		s.tx.begun, s.tx.lease = &k, out.Lease
		s.tx.mu.Unlock()
	}
	return out, err
}

func (s boundStore) Commit(_ context.Context, k idem.Key, l idem.Lease, result []byte) error {
	result = bytes.Clone(result)
	s.tx.mu.Lock()
	s.tx.record = func(ctx context.Context) error { return s.Store.Commit(ctx, k, l, result) }
	s.tx.mu.Unlock()
	return nil
}

// Client is the client's end: a ResponseRecorder that notes whether
// anything (a status or body bytes) was written to it, which the
// recorder's Code (200 from the start) does not tell.
type Client struct {
	*httptest.ResponseRecorder
	mu    sync.Mutex
	wrote bool
}

func (w *Client) WriteHeader(code int) {
	w.mu.Lock()
	w.wrote = true
	w.mu.Unlock()
	w.ResponseRecorder.WriteHeader(code)
}

func (w *Client) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.wrote = true
	w.mu.Unlock()
	return w.ResponseRecorder.Write(p)
}

// Written reports whether a status or body bytes reached w.
func (w *Client) Written() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.wrote || w.Body.Len() != 0
}

// Env is a middleware configuration in transaction mode on fake
// transactions over one memstore; each request's Tx is sent on a channel
// that Serve reads.
type Env struct {
	store     *memstore.Store
	txs       chan *Tx
	mu        sync.Mutex
	client    *Client // the writer of the request being served, which Commit inspects
	commitErr error   // when set, what each Commit fails with
}

// New returns an Env on a new memstore.
func New(tb testing.TB) *Env {
	tb.Helper()
	s, err := memstore.New(memstore.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	return &Env{store: s, txs: make(chan *Tx, 10)}
}

// Config is the middleware's configuration: RequireKey, and BeginTx
// making a Tx whose Context carries it under ValueKey.
func (e *Env) Config() idemhttp.Config {
	return idemhttp.Config{Store: e.store, RequireKey: true, BeginTx: e.beginTx}
}

// SetCommitErr makes every later Commit fail with err (nil: succeed).
func (e *Env) SetCommitErr(err error) {
	e.mu.Lock()
	e.commitErr = err
	e.mu.Unlock()
}

// CurrentClient is the client of the request being served.
func (e *Env) CurrentClient() *Client {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.client
}

func (e *Env) beginTx(r *http.Request) (*idemhttp.Tx, error) {
	ftx := &Tx{}
	e.txs <- ftx
	return &idemhttp.Tx{
		Store:   boundStore{Store: e.store, tx: ftx},
		Context: context.WithValue(r.Context(), ValueKey{}, ftx),
		Commit: func(ctx context.Context) error {
			ftx.mu.Lock()
			defer ftx.mu.Unlock()
			ftx.commits++
			e.mu.Lock()
			cw, commitErr := e.client, e.commitErr
			e.mu.Unlock()
			if cw.Written() || cw.Flushed {
				ftx.early = append(ftx.early, "status "+http.StatusText(cw.Code)+", body "+cw.Body.String())
			}
			if commitErr != nil { // the transaction is gone, its rows with it
				if ftx.begun != nil {
					_ = e.store.FailTransient(ctx, *ftx.begun, ftx.lease)
				}
				return commitErr
			}
			if ftx.record == nil {
				return nil
			}
			return ftx.record(ctx)
		},
		Rollback: func(ctx context.Context) error {
			ftx.mu.Lock()
			defer ftx.mu.Unlock()
			ftx.rollbacks++
			if ftx.begun != nil {
				return e.store.FailTransient(ctx, *ftx.begun, ftx.lease)
			}
			return nil
		},
	}, nil
}

// Serve sends h a JSON POST to target with Idempotency-Key k and returns
// what the client got and the request's transaction, if one was begun.
func (e *Env) Serve(tb testing.TB, h http.Handler, target, k string) (*Client, *Tx) {
	tb.Helper()
	r := httptest.NewRequest(http.MethodPost, target, strings.NewReader(`{"sku":"a"}`))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Idempotency-Key", k)
	return e.ServeRequest(h, r)
}

// ServeRequest sends h r and returns what the client got and the
// request's transaction, if one was begun.
func (e *Env) ServeRequest(h http.Handler, r *http.Request) (*Client, *Tx) {
	w := &Client{ResponseRecorder: httptest.NewRecorder()}
	e.mu.Lock()
	e.client = w
	e.mu.Unlock()
	h.ServeHTTP(w, r)
	select {
	case ftx := <-e.txs:
		return w, ftx
	default:
		return w, nil
	}
}
