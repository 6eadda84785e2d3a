package idemgin_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/contrib/idemgin"
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
	record    func(context.Context) error // the record written in the transaction, applied at Commit
}

// boundStore is a memstore bound to a fakeTx, as pgstore's WithTx is to a
// pgx.Tx: the record its Commit writes reaches the memstore only when the
// transaction commits, and the key its Begin leased is released when the
// transaction rolls back or fails to commit, as a real transaction's end
// keeps or undoes the Begin's and the Commit's rows.
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

func (s boundStore) Commit(_ context.Context, k idem.Key, l idem.Lease, result []byte) error {
	result = bytes.Clone(result)
	s.tx.mu.Lock()
	s.tx.record = func(ctx context.Context) error { return s.Store.Commit(ctx, k, l, result) }
	s.tx.mu.Unlock()
	return nil
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

// txEngine is a gin engine with the middleware in transaction mode, each
// request's fakeTx (bound to a memstore, whose Store stands for the
// transaction's) sent on txs; client is the writer of the request being
// served, which the fake Commit inspects.
type txEngine struct {
	engine *gin.Engine
	txs    chan *fakeTx
	mu     sync.Mutex
	client *clientWriter
	// commitErr, when set, is what each transaction's Commit fails with.
	commitErr error
}

func newTxEngine(t *testing.T) *txEngine {
	t.Helper()
	s, err := memstore.New(memstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	e := &txEngine{txs: make(chan *fakeTx, 10)}
	mw, err := idemgin.New(idemhttp.Config{
		Store: s, RequireKey: true,
		BeginTx: func(r *http.Request) (*idemhttp.Tx, error) {
			ftx := &fakeTx{}
			e.txs <- ftx
			return &idemhttp.Tx{
				Store:   boundStore{Store: s, tx: ftx},
				Context: context.WithValue(r.Context(), txValueKey{}, ftx),
				Commit: func(ctx context.Context) error {
					ftx.mu.Lock()
					defer ftx.mu.Unlock()
					ftx.commits++
					e.mu.Lock()
					cw, commitErr := e.client, e.commitErr
					e.mu.Unlock()
					if cw.written() || cw.Flushed {
						ftx.early = append(ftx.early, "status "+http.StatusText(cw.Code)+", body "+cw.Body.String())
					}
					if commitErr != nil { // the transaction is gone, its rows with it
						if ftx.begun != nil {
							_ = s.FailTransient(ctx, *ftx.begun, ftx.lease)
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
	e.engine = gin.New()
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

// In transaction mode through the gin adapter, a handler answering with
// c.JSON finds the transaction in c.Request.Context(), its 201 is held
// until the record and the transaction are committed (nothing reaches the
// client before Commit), the transaction is committed once and not rolled
// back, the client then gets the 201, and a retry with the same key is a
// replay that does not run the handler.
func TestTxCommitHoldsTheResponse(t *testing.T) {
	e := newTxEngine(t)
	runs := 0
	var seen []any
	e.engine.POST("/orders", func(c *gin.Context) {
		runs++
		tx, _ := c.Request.Context().Value(txValueKey{}).(*fakeTx)
		seen = append(seen, tx)
		c.JSON(http.StatusCreated, gin.H{"order": runs})
	})

	w, tx := e.serve(t, "/orders", "k1")
	if tx == nil {
		t.Fatal("BeginTx was not called")
	}
	if len(seen) != 1 || seen[0] != tx {
		t.Errorf("the handler found %v in c.Request.Context(), want the request's transaction %p", seen, tx)
	}
	commits, rollbacks, early := tx.calls()
	if commits != 1 || rollbacks != 0 {
		t.Errorf("Commit called %d times, Rollback %d, want 1 and 0", commits, rollbacks)
	}
	if len(early) != 0 {
		t.Errorf("the client had been sent %q before the transaction was committed", early)
	}
	if w.Code != http.StatusCreated || w.Body.String() != `{"order":1}` || replayed(w.ResponseRecorder) {
		t.Errorf("client got %d %q replayed=%v, want 201 {\"order\":1}", w.Code, w.Body.String(), replayed(w.ResponseRecorder))
	}
	if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type %q, want c.JSON's application/json", ct)
	}

	retry, rtx := e.serve(t, "/orders", "k1")
	if retry.Code != http.StatusCreated || retry.Body.String() != `{"order":1}` || !replayed(retry.ResponseRecorder) {
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

// In transaction mode through the gin adapter, a handler answering 502
// with c.JSON has its transaction rolled back, not committed; the client
// gets the 502 as written, and a retry with the same key runs the handler
// again.
func TestTxFailureRollsBack(t *testing.T) {
	e := newTxEngine(t)
	runs, found := 0, 0
	e.engine.POST("/orders", func(c *gin.Context) {
		runs++
		if c.Request.Context().Value(txValueKey{}) != nil {
			found++
		}
		c.JSON(http.StatusBadGateway, gin.H{"error": "upstream down", "run": runs})
	})
	for i := range 2 {
		w, tx := e.serve(t, "/orders", "k1")
		if tx == nil {
			t.Fatalf("request %d: BeginTx was not called", i)
		}
		if commits, rollbacks, _ := tx.calls(); commits != 0 || rollbacks != 1 {
			t.Errorf("request %d: Commit called %d times, Rollback %d, want 0 and 1", i, commits, rollbacks)
		}
		want := `{"error":"upstream down","run":` + string(rune('1'+i)) + `}`
		if w.Code != http.StatusBadGateway || w.Body.String() != want || replayed(w.ResponseRecorder) {
			t.Errorf("request %d: client got %d %q replayed=%v, want 502 %s", i, w.Code, w.Body.String(), replayed(w.ResponseRecorder), want)
		}
	}
	if runs != 2 {
		t.Errorf("the handler ran %d times, want 2 (the 502 is not recorded)", runs)
	}
	if found != runs {
		t.Errorf("the handler found its transaction in c.Request.Context() in %d of %d runs", found, runs)
	}
}

// In transaction mode through the gin adapter, when Tx.Commit fails after
// the handler answered 201, the client gets 503 with the store-unavailable
// problem and nothing of the 201 (status, body or the handler's headers),
// and a retry with the same key runs the handler again.
func TestTxCommitFailureAnswers503(t *testing.T) {
	e := newTxEngine(t)
	e.commitErr = errors.New("connection reset during COMMIT")
	runs := 0
	e.engine.POST("/orders", func(c *gin.Context) {
		runs++
		c.Header("Location", "/orders/1")
		c.JSON(http.StatusCreated, gin.H{"order": runs})
	})

	w, tx := e.serve(t, "/orders", "k1")
	if tx == nil {
		t.Fatal("BeginTx was not called")
	}
	if commits, _, early := tx.calls(); commits != 1 || len(early) != 0 {
		t.Errorf("Commit called %d times, the client sent %q before it; want 1 and nothing", commits, early)
	}
	wantProblem(t, w.ResponseRecorder, http.StatusServiceUnavailable, idemhttp.ProblemStoreUnavailable)
	if strings.Contains(w.Body.String(), `"order"`) || w.Header().Get("Location") != "" {
		t.Errorf("the client got part of the handler's 201: body %q, Location %q", w.Body.String(), w.Header().Get("Location"))
	}

	e.mu.Lock()
	e.commitErr = nil
	e.mu.Unlock()
	retry, rtx := e.serve(t, "/orders", "k1")
	if retry.Code != http.StatusCreated || retry.Body.String() != `{"order":2}` || replayed(retry.ResponseRecorder) {
		t.Errorf("retry got %d %q replayed=%v, want the handler's second 201", retry.Code, retry.Body.String(), replayed(retry.ResponseRecorder))
	}
	if rtx == nil {
		t.Fatal("the retry began no transaction")
	}
	if commits, rollbacks, _ := rtx.calls(); commits != 1 || rollbacks != 0 {
		t.Errorf("the retry's Commit called %d times, Rollback %d, want 1 and 0", commits, rollbacks)
	}
	if runs != 2 {
		t.Errorf("the handler ran %d times, want 2 (the failed commit had no effect)", runs)
	}
}

// In transaction mode through the gin adapter, a streaming handler (c.Stream,
// and c.Writer.Flush between writes) sends nothing to the client before
// Commit: the client then gets the whole body, which is recorded and
// replayed to a retry with the same key.
func TestTxStreamIsHeldAndRecorded(t *testing.T) {
	e := newTxEngine(t)
	runs := 0
	var sentEarly []string
	e.engine.POST("/events", func(c *gin.Context) {
		runs++
		c.Header("Content-Type", "text/plain")
		c.Status(http.StatusCreated)
		i := 0
		c.Stream(func(w io.Writer) bool {
			i++
			_, _ = fmt.Fprintf(w, "part %d\n", i)
			return i < 3
		})
		_, _ = c.Writer.WriteString("tail\n")
		c.Writer.Flush()
		e.mu.Lock()
		cw := e.client
		e.mu.Unlock()
		if cw.written() || cw.Flushed {
			sentEarly = append(sentEarly, cw.Body.String())
		}
	})

	const want = "part 1\npart 2\npart 3\ntail\n"
	w, tx := e.serve(t, "/events", "k1")
	if tx == nil {
		t.Fatal("BeginTx was not called")
	}
	if len(sentEarly) != 0 {
		t.Errorf("the client had been sent %q while the handler streamed", sentEarly)
	}
	commits, rollbacks, early := tx.calls()
	if commits != 1 || rollbacks != 0 || len(early) != 0 {
		t.Errorf("Commit called %d times, Rollback %d, the client sent %q before Commit; want 1, 0 and nothing", commits, rollbacks, early)
	}
	if w.Code != http.StatusCreated || w.Body.String() != want || replayed(w.ResponseRecorder) {
		t.Errorf("client got %d %q replayed=%v, want 201 %q", w.Code, w.Body.String(), replayed(w.ResponseRecorder), want)
	}

	retry, _ := e.serve(t, "/events", "k1")
	if retry.Code != http.StatusCreated || retry.Body.String() != want || !replayed(retry.ResponseRecorder) {
		t.Errorf("retry got %d %q replayed=%v, want the replayed 201 %q", retry.Code, retry.Body.String(), replayed(retry.ResponseRecorder), want)
	}
	if ct := retry.Header().Get("Content-Type"); ct != "text/plain" {
		t.Errorf("replayed Content-Type %q, want text/plain", ct)
	}
	if runs != 1 {
		t.Errorf("the handler ran %d times, want 1", runs)
	}
}

// In transaction mode through the gin adapter, a handler failing with
// c.AbortWithStatusJSON(502, ...) has its transaction rolled back, the
// client gets that 502 as written, and a retry with the same key runs the
// handler again; a handler after it in the chain does not run.
func TestTxAbortWithStatusJSONRollsBack(t *testing.T) {
	e := newTxEngine(t)
	runs, after := 0, 0
	e.engine.POST("/orders", func(c *gin.Context) {
		runs++
		c.AbortWithStatusJSON(http.StatusBadGateway, gin.H{"error": "down", "run": runs})
	}, func(c *gin.Context) {
		after++
		c.JSON(http.StatusCreated, gin.H{"order": 1})
	})
	for i := range 2 {
		w, tx := e.serve(t, "/orders", "k1")
		if tx == nil {
			t.Fatalf("request %d: BeginTx was not called", i)
		}
		if commits, rollbacks, _ := tx.calls(); commits != 0 || rollbacks != 1 {
			t.Errorf("request %d: Commit called %d times, Rollback %d, want 0 and 1", i, commits, rollbacks)
		}
		want := fmt.Sprintf(`{"error":"down","run":%d}`, i+1)
		if w.Code != http.StatusBadGateway || w.Body.String() != want || replayed(w.ResponseRecorder) {
			t.Errorf("request %d: client got %d %q replayed=%v, want 502 %s", i, w.Code, w.Body.String(), replayed(w.ResponseRecorder), want)
		}
	}
	if runs != 2 || after != 0 {
		t.Errorf("the handler ran %d times and the one after it %d, want 2 and 0", runs, after)
	}
}

// In transaction mode through the gin adapter, a streaming handler's
// response is held and recorded whole, so c.Writer.CloseNotify does not
// report the client leaving, even after a Flush: c.Stream runs to its end
// rather than stop early and have a truncated body committed and replayed.
func TestTxStreamRunsToItsEndWhenTheClientLeaves(t *testing.T) {
	e := newTxEngine(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopped := false
	e.engine.POST("/events", func(c *gin.Context) {
		i := 0
		stopped = c.Stream(func(w io.Writer) bool {
			i++
			_, _ = fmt.Fprintf(w, "part %d\n", i)
			if i == 1 {
				c.Writer.Flush()
				cancel() // the client leaves after the first part
				// Give CloseNotify the time to report it, were it watching.
				for deadline := time.Now().Add(300 * time.Millisecond); len(c.Writer.CloseNotify()) == 0 && time.Now().Before(deadline); {
					time.Sleep(time.Millisecond)
				}
			}
			return i < 3
		})
	})
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/events", strings.NewReader(`{"sku":"a"}`))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Idempotency-Key", "k1")
	w := &clientWriter{ResponseRecorder: httptest.NewRecorder()}
	e.mu.Lock()
	e.client = w
	e.mu.Unlock()
	e.engine.ServeHTTP(w, r)
	tx := <-e.txs

	const want = "part 1\npart 2\npart 3\n"
	if stopped {
		t.Error("c.Stream stopped early: CloseNotify reported the client leaving while the response was held")
	}
	if commits, rollbacks, _ := tx.calls(); commits != 1 || rollbacks != 0 {
		t.Errorf("Commit called %d times, Rollback %d, want 1 and 0", commits, rollbacks)
	}
	retry, _ := e.serve(t, "/events", "k1")
	if retry.Code != http.StatusOK || retry.Body.String() != want || !replayed(retry.ResponseRecorder) {
		t.Errorf("retry got %d %q replayed=%v, want the whole stream replayed, %q", retry.Code, retry.Body.String(), replayed(retry.ResponseRecorder), want)
	}
}
