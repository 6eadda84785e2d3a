package idemecho_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/contrib/idemecho"
	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/store/memstore"
)

// txValueKey is the context key under which BeginTx puts the request's
// transaction, as a program puts its *sql.Tx or pgx.Tx there.
type txValueKey struct{}

// fakeTx is a database transaction standing in for a real one: its Commit
// and Rollback record their calls, and Commit checks, when it is called,
// that nothing has reached the client yet.
type fakeTx struct {
	mu        sync.Mutex
	commits   int
	rollbacks int
	early     []string // what the client had been sent when Commit was called
	begun     *idem.Key
	lease     idem.Lease
}

// boundStore is a memstore bound to a fakeTx, as pgstore's WithTx is to a
// pgx.Tx: the key its Begin leased is released when the transaction rolls
// back, as a real transaction's rollback undoes the Begin's row. (The
// tests here roll back only before the record is written.)
type boundStore struct {
	idem.Store
	tx *fakeTx
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

// clientWriter is the client's end: a ResponseRecorder that notes whether
// anything (a status or body bytes) was written to it, which the
// recorder's Code (200 from the start) does not tell.
type clientWriter struct {
	*httptest.ResponseRecorder
	mu    sync.Mutex
	wrote bool
}

func (w *clientWriter) WriteHeader(code int) {
	w.mu.Lock()
	w.wrote = true
	w.mu.Unlock()
	w.ResponseRecorder.WriteHeader(code)
}

func (w *clientWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.wrote = true
	w.mu.Unlock()
	return w.ResponseRecorder.Write(p)
}

func (w *clientWriter) written() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.wrote || w.Body.Len() != 0
}

// txEngine is an echo instance with the middleware in transaction mode, each
// request's fakeTx (bound to a memstore, whose Store stands for the
// transaction's) sent on txs; client is the writer of the request being
// served, which the fake Commit inspects.
type txEngine struct {
	engine *echo.Echo
	txs    chan *fakeTx
	mu     sync.Mutex
	client *clientWriter
}

func newTxEngine(t *testing.T) *txEngine {
	t.Helper()
	s, err := memstore.New(memstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	e := &txEngine{txs: make(chan *fakeTx, 10)}
	mw, err := idemecho.New(idemhttp.Config{
		Store: s, RequireKey: true,
		BeginTx: func(r *http.Request) (*idemhttp.Tx, error) {
			ftx := &fakeTx{}
			e.txs <- ftx
			return &idemhttp.Tx{
				Store:   boundStore{Store: s, tx: ftx},
				Context: context.WithValue(r.Context(), txValueKey{}, ftx),
				Commit: func(context.Context) error {
					ftx.mu.Lock()
					defer ftx.mu.Unlock()
					ftx.commits++
					e.mu.Lock()
					cw := e.client
					e.mu.Unlock()
					if cw.written() {
						ftx.early = append(ftx.early, "status "+http.StatusText(cw.Code)+", body "+cw.Body.String())
					}
					return nil
				},
				Rollback: func(ctx context.Context) error {
					ftx.mu.Lock()
					defer ftx.mu.Unlock()
					ftx.rollbacks++
					if ftx.begun != nil {
						return s.FailTransient(ctx, *ftx.begun, ftx.lease)
					}
					return nil
				},
			}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	e.engine = echo.New()
	e.engine.Use(mw)
	return e
}

// serve sends a POST with key k and returns what the client got and the
// request's transaction, if one was begun.
func (e *txEngine) serve(t *testing.T, target, k string) (*clientWriter, *fakeTx) {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, target, strings.NewReader(`{"sku":"a"}`))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Idempotency-Key", k)
	w := &clientWriter{ResponseRecorder: httptest.NewRecorder()}
	e.mu.Lock()
	e.client = w
	e.mu.Unlock()
	e.engine.ServeHTTP(w, r)
	select {
	case ftx := <-e.txs:
		return w, ftx
	default:
		return w, nil
	}
}

// calls is tx's Commit and Rollback calls, and what the client had been
// sent at the Commit.
func (tx *fakeTx) calls() (commits, rollbacks int, early []string) {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	return tx.commits, tx.rollbacks, tx.early
}

// In transaction mode through the echo adapter, a handler answering with
// c.JSON finds the transaction in c.Request().Context(), its 201 is held
// until the record and the transaction are committed (nothing reaches the
// client before Commit), the transaction is committed once and not rolled
// back, the client then gets the 201, and a retry with the same key is a
// replay that does not run the handler.
func TestTxCommitHoldsTheResponse(t *testing.T) {
	e := newTxEngine(t)
	runs := 0
	var seen []any
	e.engine.POST("/orders", func(c echo.Context) error {
		runs++
		tx, _ := c.Request().Context().Value(txValueKey{}).(*fakeTx)
		seen = append(seen, tx)
		return c.JSON(http.StatusCreated, map[string]int{"order": runs})
	})

	w, tx := e.serve(t, "/orders", "k1")
	if tx == nil {
		t.Fatal("BeginTx was not called")
	}
	if len(seen) != 1 || seen[0] != tx {
		t.Errorf("the handler found %v in c.Request().Context(), want the request's transaction %p", seen, tx)
	}
	commits, rollbacks, early := tx.calls()
	if commits != 1 || rollbacks != 0 {
		t.Errorf("Commit called %d times, Rollback %d, want 1 and 0", commits, rollbacks)
	}
	if len(early) != 0 {
		t.Errorf("the client had been sent %q before the transaction was committed", early)
	}
	if w.Code != http.StatusCreated || w.Body.String() != "{\"order\":1}\n" || replayed(w.ResponseRecorder) {
		t.Errorf("client got %d %q replayed=%v, want 201 {\"order\":1}", w.Code, w.Body.String(), replayed(w.ResponseRecorder))
	}
	if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type %q, want c.JSON's application/json", ct)
	}

	retry, rtx := e.serve(t, "/orders", "k1")
	if retry.Code != http.StatusCreated || retry.Body.String() != "{\"order\":1}\n" || !replayed(retry.ResponseRecorder) {
		t.Errorf("retry got %d %q replayed=%v, want the replayed 201", retry.Code, retry.Body.String(), replayed(retry.ResponseRecorder))
	}
	if runs != 1 {
		t.Errorf("the handler ran %d times, want 1", runs)
	}
	if rtx != nil {
		if commits, _, _ := rtx.calls(); commits != 0 {
			t.Errorf("the replay's transaction was committed %d times", commits)
		}
	}
}

// In transaction mode through the echo adapter, a handler answering 502
// with c.JSON has its transaction rolled back, not committed; the client
// gets the 502 as written, and a retry with the same key runs the handler
// again.
func TestTxFailureRollsBack(t *testing.T) {
	e := newTxEngine(t)
	runs, found := 0, 0
	e.engine.POST("/orders", func(c echo.Context) error {
		runs++
		if c.Request().Context().Value(txValueKey{}) != nil {
			found++
		}
		return c.JSON(http.StatusBadGateway, map[string]any{"error": "upstream down", "run": runs})
	})
	for i := range 2 {
		w, tx := e.serve(t, "/orders", "k1")
		if tx == nil {
			t.Fatalf("request %d: BeginTx was not called", i)
		}
		if commits, rollbacks, _ := tx.calls(); commits != 0 || rollbacks != 1 {
			t.Errorf("request %d: Commit called %d times, Rollback %d, want 0 and 1", i, commits, rollbacks)
		}
		want := `{"error":"upstream down","run":` + string(rune('1'+i)) + "}\n"
		if w.Code != http.StatusBadGateway || w.Body.String() != want || replayed(w.ResponseRecorder) {
			t.Errorf("request %d: client got %d %q replayed=%v, want 502 %s", i, w.Code, w.Body.String(), replayed(w.ResponseRecorder), want)
		}
	}
	if runs != 2 {
		t.Errorf("the handler ran %d times, want 2 (the 502 is not recorded)", runs)
	}
	if found != runs {
		t.Errorf("the handler found its transaction in c.Request().Context() in %d of %d runs", found, runs)
	}
}
