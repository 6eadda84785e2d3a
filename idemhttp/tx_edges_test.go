package idemhttp_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/store/memstore"
)

// fakeTx is a request's transaction as the middleware ends it: counted.
type fakeTx struct {
	commits, rollbacks atomic.Int32
	// commit, when set, is Commit's work.
	commit func(ctx context.Context) error
}

// panickyStore is a memstore whose Begin or Commit may panic.
type panickyStore struct {
	idem.Store
	beginPanics, commitPanics bool
}

func (s panickyStore) Begin(ctx context.Context, k idem.Key, r idem.Request, o *idem.BeginOpts) (idem.Outcome, error) {
	if s.beginPanics {
		panic("store Begin")
	}
	return s.Store.Begin(ctx, k, r, o)
}

func (s panickyStore) Commit(ctx context.Context, k idem.Key, l idem.Lease, b []byte) error {
	if s.commitPanics {
		panic("store Commit")
	}
	return s.Store.Commit(ctx, k, l, b)
}

// fakeTxEnv serves requests in transaction mode on fake transactions over
// a memstore.
type fakeTxEnv struct {
	store panickyStore
	// txErr, when set, is returned by BeginTx with its Tx; ctx, when set,
	// is the Tx's Context.
	txErr error
	ctx   context.Context
	// commitWork, when set, is each Tx.Commit's work.
	commitWork func(ctx context.Context) error
	mu         sync.Mutex
	txs        []*fakeTx
}

func newFakeTxEnv(t *testing.T) *fakeTxEnv {
	s, err := memstore.New(memstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return &fakeTxEnv{store: panickyStore{Store: s}}
}

func (e *fakeTxEnv) handler(t *testing.T, cfg idemhttp.Config, h http.Handler) http.Handler {
	t.Helper()
	cfg.BeginTx = func(r *http.Request) (*idemhttp.Tx, error) {
		f := &fakeTx{commit: e.commitWork}
		e.mu.Lock()
		e.txs = append(e.txs, f)
		e.mu.Unlock()
		return &idemhttp.Tx{Store: e.store, Context: e.ctx,
			Commit: func(ctx context.Context) error {
				f.commits.Add(1)
				if f.commit != nil {
					return f.commit(ctx)
				}
				return nil
			},
			Rollback: func(context.Context) error { f.rollbacks.Add(1); return nil }}, e.txErr
	}
	mw, err := idemhttp.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return mw(h)
}

func (e *fakeTxEnv) last(t *testing.T) *fakeTx {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.txs) == 0 {
		t.Fatal("no transaction begun")
	}
	return e.txs[len(e.txs)-1]
}

// servePanic serves r and returns the panic it ended with, if any.
func servePanic(h http.Handler, w http.ResponseWriter, r *http.Request) (v any) {
	defer func() { v = recover() }()
	h.ServeHTTP(w, r)
	return nil
}

// A panic anywhere in transaction mode (the store's Begin or Commit,
// Config.StoreStatus, after the handler returned) rolls the transaction
// back once before it goes on: none is left open, holding a connection.
func TestTxPanicOutsideTheHandlerRollsBack(t *testing.T) {
	for name, set := range map[string]func(*fakeTxEnv, *idemhttp.Config){
		"store Begin":  func(e *fakeTxEnv, _ *idemhttp.Config) { e.store.beginPanics = true },
		"store Commit": func(e *fakeTxEnv, _ *idemhttp.Config) { e.store.commitPanics = true },
		"StoreStatus":  func(_ *fakeTxEnv, c *idemhttp.Config) { c.StoreStatus = func(int) bool { panic("StoreStatus") } },
	} {
		t.Run(name, func(t *testing.T) {
			e := newFakeTxEnv(t)
			var cfg idemhttp.Config
			set(e, &cfg)
			h := e.handler(t, cfg, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) }))
			if v := servePanic(h, httptest.NewRecorder(), postReq("k-panic")); v == nil {
				t.Fatal("no panic")
			}
			if f := e.last(t); f.rollbacks.Load() != 1 || f.commits.Load() != 0 {
				t.Errorf("%d commits, %d rollbacks; want the transaction rolled back once", f.commits.Load(), f.rollbacks.Load())
			}
		})
	}
}

func postReq(key string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/x", strings.NewReader("b"))
	r.Header.Set(idem.HeaderName, key)
	return r
}

// A handler writing an invalid status panics in the handler, as net/http
// makes it, so its transaction is rolled back: nothing is committed with
// a record no replay could read.
func TestTxInvalidStatusPanicsInTheHandler(t *testing.T) {
	e := newFakeTxEnv(t)
	h := e.handler(t, idemhttp.Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(0)
		_, _ = io.WriteString(w, "created")
	}))
	if v := servePanic(h, httptest.NewRecorder(), postReq("k-status")); v == nil {
		t.Fatal("no panic for status 0")
	}
	if f := e.last(t); f.commits.Load() != 0 || f.rollbacks.Load() != 1 {
		t.Errorf("%d commits, %d rollbacks; want rolled back", f.commits.Load(), f.rollbacks.Load())
	}
}

// A success response over MaxCapture, which is answered 500 and never
// sent, is not held past the cap: a handler writing 64 MiB does not make
// the middleware hold 64 MiB.
func TestTxUnrecordableSuccessIsNotHeldPastTheCap(t *testing.T) {
	e := newFakeTxEnv(t)
	chunk := make([]byte, 1<<20)
	h := e.handler(t, idemhttp.Config{MaxCapture: 1 << 20}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for range 64 {
			_, _ = w.Write(chunk)
		}
	}))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, postReq("k-big"))
	runtime.ReadMemStats(&after)
	if w.Code != http.StatusInternalServerError {
		t.Fatalf("status %d, want 500", w.Code)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 16<<20 {
		t.Errorf("serving allocated %d MiB, want far less than the 64 MiB written", got>>20)
	}
}

// A Tx.Commit cut short by Config.StoreTimeout may have committed: the
// client is told to retry with the same key, not that nothing happened.
func TestTxCommitTimeoutIsNotNoEffect(t *testing.T) {
	e := newFakeTxEnv(t)
	// The commit outlives the timeout and reports it, as pgx does.
	e.commitWork = func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	}
	h := e.handler(t, idemhttp.Config{StoreTimeout: 20 * time.Millisecond}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
	}))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, postReq("k-slow"))
	if w.Code != http.StatusServiceUnavailable || strings.Contains(w.Body.String(), "no effect") || !strings.Contains(w.Body.String(), "same key") {
		t.Errorf("%d %s; want 503 saying to retry with the same key, not that it had no effect", w.Code, w.Body)
	}
}

// http.ResponseController's deadlines reach the connection in transaction
// mode as in lease mode (a handler extending its write deadline).
func TestTxDeadlinesReachTheConnection(t *testing.T) {
	e := newFakeTxEnv(t)
	errs := make(chan error, 2)
	srv := httptest.NewServer(e.handler(t, idemhttp.Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		errs <- rc.SetWriteDeadline(time.Now().Add(time.Minute))
		errs <- rc.SetReadDeadline(time.Now().Add(time.Minute))
		w.WriteHeader(http.StatusCreated)
	})))
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("b"))
	req.Header.Set(idem.HeaderName, "k-deadline")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for range 2 {
		if err := <-errs; err != nil {
			t.Errorf("setting a deadline: %v", err)
		}
	}
}

// The handler's context is Tx.Context as BeginTx made it, its own
// deadline kept (BeginTx's request is already detached from the client).
func TestTxContextKeepsItsDeadline(t *testing.T) {
	e := newFakeTxEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	e.ctx = ctx
	var deadline bool
	h := e.handler(t, idemhttp.Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, deadline = r.Context().Deadline()
		w.WriteHeader(http.StatusCreated)
	}))
	h.ServeHTTP(httptest.NewRecorder(), postReq("k-ctx"))
	if !deadline {
		t.Error("the handler's context lost Tx.Context's deadline")
	}
}

// A BeginTx that returns a Tx with its error has that Tx rolled back.
func TestTxBeginTxErrorWithATxRollsItBack(t *testing.T) {
	e := newFakeTxEnv(t)
	e.txErr = errors.New("SET LOCAL failed")
	h := e.handler(t, idemhttp.Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Error("the handler ran")
	}))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, postReq("k-txerr"))
	if w.Code != http.StatusServiceUnavailable {
		t.Errorf("status %d, want 503", w.Code)
	}
	if f := e.last(t); f.rollbacks.Load() != 1 || f.commits.Load() != 0 {
		t.Errorf("%d commits, %d rollbacks; want the Tx rolled back", f.commits.Load(), f.rollbacks.Load())
	}
}

// Header fields changed after WriteHeader are not sent, in transaction
// mode as in lease mode (net/http sends the header as it was then), so
// the first response and its replay agree; trailers are still taken at
// the end.
func TestTxHeaderIsSentAsAtWriteHeader(t *testing.T) {
	e := newFakeTxEnv(t)
	h := e.handler(t, idemhttp.Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "/orders/1")
		w.Header().Set("Trailer", "X-Checksum")
		w.WriteHeader(http.StatusCreated)
		w.Header().Set("Location", "/orders/wrong")
		w.Header().Set("Set-Cookie", "late=1")
		_, _ = io.WriteString(w, "ok")
		w.Header().Set("X-Checksum", "abc")
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	for i := range 2 {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("b"))
		req.Header.Set(idem.HeaderName, "k-late-header")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated || resp.Header.Get("Location") != "/orders/1" || resp.Header.Get("Set-Cookie") != "" || resp.Trailer.Get("X-Checksum") != "abc" {
			t.Errorf("response %d: %d, Location %q, Set-Cookie %q, trailer %q; want 201, /orders/1, none, abc",
				i, resp.StatusCode, resp.Header.Get("Location"), resp.Header.Get("Set-Cookie"), resp.Trailer.Get("X-Checksum"))
		}
	}
}
