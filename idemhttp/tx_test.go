package idemhttp_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/internal/pgtest"
	"github.com/idemgo/idem/store/pgstore"
)

// txKey is the context key of the handler's pgx.Tx.
type txKey struct{}

// txEnv is a PostgreSQL database with an orders table and a pgstore, and a
// middleware in transaction mode on it.
type txEnv struct {
	t       *testing.T
	pool    *pgxpool.Pool
	store   *pgstore.Store
	appName string // the pool's application_name, to find its sessions

	mu     sync.Mutex
	events []idemhttp.Event
	begun  int // transactions BeginTx began
}

func newTxEnv(t *testing.T) *txEnv {
	t.Helper()
	return newTxEnvWith(t, pgstore.Config{})
}

func newTxEnvWith(t *testing.T, storeCfg pgstore.Config) *txEnv {
	t.Helper()
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	e := &txEnv{t: t, appName: "idemhttp_tx_" + hex.EncodeToString(b)}
	cfg.ConnConfig.RuntimeParams["application_name"] = e.appName
	if e.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.pool.Close)
	if e.store, err = pgstore.New(e.pool, storeCfg); err != nil {
		t.Fatal(err)
	}
	if err := e.store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(ctx, `CREATE TABLE orders (id bigserial PRIMARY KEY, sku text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return e
}

// beginTx is the Config.BeginTx of a pgx program.
func (e *txEnv) beginTx(r *http.Request) (*idemhttp.Tx, error) {
	tx, err := e.pool.Begin(r.Context())
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.begun++
	e.mu.Unlock()
	return &idemhttp.Tx{Store: e.store.WithTx(tx), Context: context.WithValue(r.Context(), txKey{}, tx), Commit: tx.Commit, Rollback: tx.Rollback}, nil
}

// handler wraps h with a middleware in transaction mode configured by cfg
// (BeginTx and OnEvent set here).
func (e *txEnv) handler(cfg idemhttp.Config, h http.Handler) http.Handler {
	e.t.Helper()
	cfg.BeginTx = e.beginTx
	cfg.OnEvent = func(ev idemhttp.Event) {
		e.mu.Lock()
		e.events = append(e.events, ev)
		e.mu.Unlock()
	}
	mw, err := idemhttp.New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	return mw(h)
}

// lastEvent is the event of the last request.
func (e *txEnv) lastEvent() idemhttp.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.events) == 0 {
		e.t.Fatal("no event")
	}
	return e.events[len(e.events)-1]
}

func (e *txEnv) outcomes(o idemhttp.Outcome) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, ev := range e.events {
		if ev.Outcome == o {
			n++
		}
	}
	return n
}

// rows is the number of orders of sku.
func (e *txEnv) rows(sku string) int {
	e.t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM orders WHERE sku = $1`, sku).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// noTxLeft fails the test unless, within a deadline, no connection of
// the pool is in use and none of its sessions is idle in a transaction.
func (e *txEnv) noTxLeft() {
	e.t.Helper()
	e.openTx(0)
}

// openTx waits, up to a deadline, for exactly want connections of the pool
// to be in use (each holding a request's transaction) and as many of its
// sessions to be in a transaction.
func (e *txEnv) openTx(want int) {
	e.t.Helper()
	var acquired, inTx int
	for deadline := time.Now().Add(10 * time.Second); ; {
		acquired = int(e.pool.Stat().AcquiredConns())
		// Over a connection of its own: the pool's might all be in use.
		conn, err := pgx.Connect(context.Background(), e.pool.Config().ConnString())
		if err != nil {
			e.t.Fatal(err)
		}
		err = conn.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND state LIKE 'idle in transaction%'`, e.appName).Scan(&inTx)
		conn.Close(context.Background())
		if err != nil {
			e.t.Fatal(err)
		}
		if acquired == want && (want == 0 && inTx == 0 || want > 0) {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%d connections in use, %d sessions idle in a transaction; want %d", acquired, inTx, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// leftNothing fails the test unless a request rolled back left nothing:
// no order of sku, no transaction open, no record of key.
func (e *txEnv) leftNothing(sku, key string) {
	e.t.Helper()
	if n := e.rows(sku); n != 0 {
		e.t.Fatalf("%d %s rows, want 0", n, sku)
	}
	e.noTxLeft()
	e.keyFree(key)
}

// keyFree fails the test unless key has no record.
func (e *txEnv) keyFree(value string) {
	e.t.Helper()
	key, err := idem.ParseHeader(idemhttp.DefaultNamespace, []string{value})
	if err != nil {
		e.t.Fatal(err)
	}
	if key, err = key.WithScope(idemhttp.ScopeByAuthorization(httptest.NewRequest(http.MethodPost, "/", nil))); err != nil {
		e.t.Fatal(err)
	}
	if rec, err := e.store.Get(context.Background(), key); !errors.Is(err, idem.ErrNotFound) {
		e.t.Fatalf("record of %s: %+v, %v; want none", value, rec, err)
	}
}

// insert is a handler that inserts an order of the sku in the body, in the
// request's transaction, and answers status with the order's id.
func insert(status int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx, ok := r.Context().Value(txKey{}).(pgx.Tx)
		if !ok {
			http.Error(w, "no transaction", http.StatusTeapot)
			return
		}
		sku, _ := io.ReadAll(r.Body)
		var id int64
		if err := tx.QueryRow(r.Context(), `INSERT INTO orders (sku) VALUES ($1) RETURNING id`, string(sku)).Scan(&id); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"id":%d,"sku":%q}`, id, sku)
	})
}

func postTx(h http.Handler, key, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(body))
	if key != "" {
		r.Header.Set(idem.HeaderName, key)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// Twenty concurrent identical requests in transaction mode insert one
// row: the first runs, the others get 409 while its transaction is open
// and, retried, the first's body replayed.
func TestTxConcurrentRequestsInsertOneRow(t *testing.T) {
	e := newTxEnv(t)
	inProgress := func() int { return e.outcomes(idemhttp.OutcomeInProgress) }
	h := e.handler(idemhttp.Config{RequireKey: true}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Hold the transaction open until another request found it so.
		for deadline := time.Now().Add(10 * time.Second); inProgress() == 0 && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
		insert(http.StatusCreated).ServeHTTP(w, r)
	}))
	var wg sync.WaitGroup
	bodies, first := make([]string, 20), make([]string, 20)
	for i := range 20 {
		wg.Go(func() {
			for n := 0; ; n++ {
				w := postTx(h, "k-concurrent", "book")
				if w.Code == http.StatusConflict && n < 2000 {
					if n == 0 {
						first[i] = "409"
					}
					time.Sleep(5 * time.Millisecond)
					continue
				}
				if w.Code != http.StatusCreated {
					t.Errorf("status %d: %s", w.Code, w.Body)
				}
				bodies[i] = w.Body.String()
				return
			}
		})
	}
	wg.Wait()
	if n := e.rows("book"); n != 1 {
		t.Fatalf("%d rows, want 1", n)
	}
	if n := e.outcomes(idemhttp.OutcomeExecuted); n != 1 {
		t.Errorf("%d requests executed, want 1", n)
	}
	if inProgress() == 0 {
		t.Error("no request found the first in progress")
	}
	for _, b := range bodies {
		if b != bodies[0] {
			t.Fatalf("bodies differ: %q vs %q", b, bodies[0])
		}
	}
	w := postTx(h, "k-concurrent", "book")
	if w.Code != http.StatusCreated || w.Header().Get(idemhttp.ReplayedHeader) != "true" || w.Body.String() != bodies[0] {
		t.Errorf("replay: %d %q %s; want 201, replayed, %s", w.Code, w.Header().Get(idemhttp.ReplayedHeader), w.Body, bodies[0])
	}
	e.noTxLeft()
}

// A handler that inserts a row and then answers 502 has its row rolled
// back, its 502 delivered as written, and the key left free: the retry
// inserts exactly one row.
func TestTxFailureResponseRollsBack(t *testing.T) {
	e := newTxEnv(t)
	status := http.StatusBadGateway
	h := e.handler(idemhttp.Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		insert(status).ServeHTTP(w, r)
	}))
	w := postTx(h, "k-502", "pen")
	if w.Code != http.StatusBadGateway || !strings.Contains(w.Body.String(), `"sku":"pen"`) {
		t.Fatalf("%d %s; want the handler's 502", w.Code, w.Body)
	}
	if ev := e.lastEvent(); ev.Outcome != idemhttp.OutcomeReleased || ev.Status != http.StatusBadGateway {
		t.Errorf("event %s %d, want released 502", ev.Outcome, ev.Status)
	}
	e.leftNothing("pen", "k-502")
	status = http.StatusCreated
	if w := postTx(h, "k-502", "pen"); w.Code != http.StatusCreated || w.Header().Get(idemhttp.ReplayedHeader) != "" {
		t.Fatalf("retry: %d %s; want 201, not replayed", w.Code, w.Body)
	}
	if w := postTx(h, "k-502", "pen"); w.Code != http.StatusCreated || w.Header().Get(idemhttp.ReplayedHeader) != "true" {
		t.Fatalf("second retry: %d %s; want 201 replayed", w.Code, w.Body)
	}
	if n := e.rows("pen"); n != 1 {
		t.Fatalf("%d rows after the retries, want 1", n)
	}
}

// A 201 whose transaction fails to commit (a deferred unique constraint)
// is never sent: the client gets 503, no row and no record are left, and
// the retry runs once.
func TestTxCommitFailureAnswers503(t *testing.T) {
	e := newTxEnv(t)
	ctx := context.Background()
	if _, err := e.pool.Exec(ctx, `ALTER TABLE orders ADD CONSTRAINT orders_sku UNIQUE (sku) DEFERRABLE INITIALLY DEFERRED;
		INSERT INTO orders (sku) VALUES ('lamp')`); err != nil {
		t.Fatal(err)
	}
	ran := 0
	h := e.handler(idemhttp.Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ran++
		insert(http.StatusCreated).ServeHTTP(w, r)
	}))
	w := postTx(h, "k-commit", "lamp")
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), idemhttp.ProblemStoreUnavailable) || w.Header().Get("Retry-After") == "" {
		t.Fatalf("%d %v %s; want 503 store-unavailable with Retry-After", w.Code, w.Header(), w.Body)
	}
	if ev := e.lastEvent(); ev.Outcome != idemhttp.OutcomeStoreError || ev.Err == nil {
		t.Errorf("event %s %v, want store_error with the commit's error", ev.Outcome, ev.Err)
	}
	if n := e.rows("lamp"); n != 1 {
		t.Fatalf("%d lamp rows, want the 1 inserted before", n)
	}
	e.noTxLeft()
	e.keyFree("k-commit")
	if _, err := e.pool.Exec(ctx, `DELETE FROM orders WHERE sku = 'lamp'`); err != nil {
		t.Fatal(err)
	}
	if w := postTx(h, "k-commit", "lamp"); w.Code != http.StatusCreated {
		t.Fatalf("retry: %d %s; want 201", w.Code, w.Body)
	}
	if w := postTx(h, "k-commit", "lamp"); w.Code != http.StatusCreated || w.Header().Get(idemhttp.ReplayedHeader) != "true" {
		t.Fatalf("second retry: %d %s; want 201 replayed", w.Code, w.Body)
	}
	if n := e.rows("lamp"); n != 1 || ran != 2 {
		t.Fatalf("%d rows, handler ran %d times; want 1 row, 2 runs", n, ran)
	}
}

// A 201 whose record is larger than the store accepts is never sent: the
// transaction is rolled back and the client gets 500 "not recorded", as
// for a response over MaxCapture, not a 503 "retry later" that every
// retry would get again.
func TestTxRecordTooLargeForTheStoreAnswers500(t *testing.T) {
	e := newTxEnvWith(t, pgstore.Config{MaxPayload: 1024})
	h := e.handler(idemhttp.Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		insert(http.StatusCreated).ServeHTTP(w, r)
		_, _ = io.WriteString(w, strings.Repeat("x", 2000))
	}))
	w := postTx(h, "k-record", "chair")
	if w.Code != http.StatusInternalServerError || !strings.Contains(w.Body.String(), idemhttp.ProblemInternal) || !strings.Contains(w.Body.String(), "no effect") {
		t.Fatalf("%d %.200s; want 500 internal, no effect", w.Code, w.Body)
	}
	if ev := e.lastEvent(); ev.Outcome != idemhttp.OutcomeReleased || !errors.As(ev.Err, new(*idem.PayloadTooLargeError)) {
		t.Errorf("event %s %v, want released with the record's error", ev.Outcome, ev.Err)
	}
	e.leftNothing("chair", "k-record")
}

// A handler that panics after inserting has its transaction rolled back
// before the panic goes on: no row, no record, no transaction left.
func TestTxPanicRollsBack(t *testing.T) {
	e := newTxEnv(t)
	h := e.handler(idemhttp.Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		insert(http.StatusCreated).ServeHTTP(w, r)
		panic("boom")
	}))
	func() {
		defer func() {
			if v := recover(); v != "boom" {
				t.Errorf("recovered %v, want the handler's panic", v)
			}
		}()
		postTx(h, "k-panic", "cup")
		t.Error("no panic")
	}()
	if ev := e.lastEvent(); ev.Outcome != idemhttp.OutcomeReleased || ev.Status != http.StatusInternalServerError {
		t.Errorf("event %s %d, want released 500", ev.Outcome, ev.Status)
	}
	e.leftNothing("cup", "k-panic")
}

// A 2xx response over MaxCapture cannot be recorded: it is rolled back
// and answered with a 500 problem saying so, and the key stays free.
func TestTxUnrecordableSuccessAnswers500(t *testing.T) {
	e := newTxEnv(t)
	big := strings.Repeat("x", 100)
	h := e.handler(idemhttp.Config{MaxCapture: 10}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		insert(http.StatusCreated).ServeHTTP(w, r)
		_, _ = io.WriteString(w, big)
	}))
	w := postTx(h, "k-big", "desk")
	if w.Code != http.StatusInternalServerError || !strings.Contains(w.Body.String(), "could not be recorded") || strings.Contains(w.Body.String(), big) {
		t.Fatalf("%d %s; want a 500 problem saying the response could not be recorded", w.Code, w.Body)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type %q: the handler's headers leaked into the problem", ct)
	}
	e.leftNothing("desk", "k-big")
}

// A flush in transaction mode holds: the client sees nothing of the
// response until the transaction committed, and then all of it.
func TestTxFlushHeld(t *testing.T) {
	e := newTxEnv(t)
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	h := e.handler(idemhttp.Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "part1;")
		if err := http.NewResponseController(w).Flush(); err != nil {
			t.Errorf("Flush: %v", err)
		}
		<-release
		insert(http.StatusCreated).ServeHTTP(w, r)
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	defer free() // before the server closes: a failing test does not hang
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = io.WriteString(conn, "POST /orders HTTP/1.1\r\nHost: x\r\nIdempotency-Key: k-flush\r\nContent-Length: 4\r\nConnection: close\r\n\r\nsofa")
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	var b [1]byte
	if n, err := conn.Read(b[:]); n > 0 || !isTimeout(err) {
		t.Fatalf("read %q, %v before the transaction ended; want nothing", b[:n], err)
	}
	free()
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusCreated || !strings.HasPrefix(string(body), "part1;{") {
		t.Fatalf("%d %q %v; want 201 and the whole body", res.StatusCode, body, err)
	}
	if n := e.rows("sofa"); n != 1 {
		t.Fatalf("%d rows, want 1", n)
	}
	if w := postTx(h, "k-flush", "sofa"); w.Body.String() != string(body) || w.Header().Get(idemhttp.ReplayedHeader) != "true" {
		t.Errorf("replay %q %q, want %q replayed: a flushed response is recorded", w.Body, w.Header().Get(idemhttp.ReplayedHeader), body)
	}
	e.noTxLeft()
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// Hijack in transaction mode fails with http.ErrNotSupported; the
// handler's plain response is then committed and delivered.
func TestTxHijackRefused(t *testing.T) {
	e := newTxEnv(t)
	h := e.handler(idemhttp.Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if !errors.Is(err, http.ErrNotSupported) {
			t.Errorf("Hijack: %v, %v; want http.ErrNotSupported", conn, err)
			if conn != nil {
				conn.Close()
			}
		}
		insert(http.StatusCreated).ServeHTTP(w, r)
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/orders", strings.NewReader("lamp"))
	req.Header.Set(idem.HeaderName, "k-hijack")
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusCreated || e.rows("lamp") != 1 {
		t.Fatalf("%d, %d rows; want 201 and 1 row", res.StatusCode, e.rows("lamp"))
	}
	e.noTxLeft()
}

// Begin answers that are not Fresh roll the request's transaction back:
// a replay (PriorResult), a Mismatch and an InFlight leave no transaction
// open and write nothing.
func TestTxNotFreshRollsBack(t *testing.T) {
	e := newTxEnv(t)
	hold, held := make(chan struct{}), make(chan struct{})
	h := e.handler(idemhttp.Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Hold") != "" {
			close(held)
			<-hold
		}
		insert(http.StatusCreated).ServeHTTP(w, r)
	}))
	first := postTx(h, "k-1", "vase")
	if first.Code != http.StatusCreated {
		t.Fatalf("%d %s", first.Code, first.Body)
	}
	e.noTxLeft()

	w := postTx(h, "k-1", "vase")
	if w.Code != http.StatusCreated || w.Body.String() != first.Body.String() || e.lastEvent().Outcome != idemhttp.OutcomeReplayed {
		t.Fatalf("replay: %d %s %s", w.Code, w.Body, e.lastEvent().Outcome)
	}
	e.noTxLeft()

	if w := postTx(h, "k-1", "other"); w.Code != http.StatusUnprocessableEntity || !strings.Contains(w.Body.String(), idemhttp.ProblemKeyReused) {
		t.Fatalf("mismatch: %d %s", w.Code, w.Body)
	}
	e.noTxLeft()

	done := make(chan *httptest.ResponseRecorder)
	go func() {
		r := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader("bowl"))
		r.Header.Set(idem.HeaderName, "k-2")
		r.Header.Set("X-Hold", "1")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		done <- w
	}()
	<-held
	if w := postTx(h, "k-2", "bowl"); w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), idemhttp.ProblemInProgress) {
		t.Errorf("in flight: %d %s", w.Code, w.Body)
	}
	e.openTx(1) // the first's only
	close(hold)
	if w := <-done; w.Code != http.StatusCreated {
		t.Fatalf("held request: %d %s", w.Code, w.Body)
	}
	e.noTxLeft()
	if e.rows("vase") != 1 || e.rows("other") != 0 || e.rows("bowl") != 1 {
		t.Errorf("rows vase %d other %d bowl %d, want 1 0 1", e.rows("vase"), e.rows("other"), e.rows("bowl"))
	}
}

// A failing BeginTx answers 503 without running the handler.
func TestTxBeginTxError(t *testing.T) {
	ran := false
	mw, err := idemhttp.New(idemhttp.Config{BeginTx: func(*http.Request) (*idemhttp.Tx, error) { return nil, errors.New("pool exhausted") }})
	if err != nil {
		t.Fatal(err)
	}
	w := postTx(mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran = true })), "k", "x")
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), idemhttp.ProblemStoreUnavailable) || ran {
		t.Fatalf("%d %s, handler ran %v; want 503 and not run", w.Code, w.Body, ran)
	}
}

// New refuses FailOpen with BeginTx, naming both.
func TestTxFailOpenRefused(t *testing.T) {
	_, err := idemhttp.New(idemhttp.Config{FailOpen: true, BeginTx: func(*http.Request) (*idemhttp.Tx, error) { return nil, nil }})
	if err == nil || !strings.Contains(err.Error(), "Config.FailOpen") || !strings.Contains(err.Error(), "Config.BeginTx") {
		t.Fatalf("New: %v; want an error naming Config.FailOpen and Config.BeginTx", err)
	}
}

// Requests passed through, without a key or with an unprotected method,
// get no transaction.
func TestTxPassThroughHasNoTx(t *testing.T) {
	e := newTxEnv(t)
	h := e.handler(idemhttp.Config{}, insert(http.StatusCreated))
	if w := postTx(h, "", "rug"); w.Code != http.StatusTeapot {
		t.Errorf("no key: %d %s; want the handler's answer without a transaction", w.Code, w.Body)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/orders", nil))
	if w.Code != http.StatusTeapot {
		t.Errorf("GET: %d %s; want the handler's answer without a transaction", w.Code, w.Body)
	}
	if e.begun != 0 {
		t.Errorf("%d transactions begun, want 0", e.begun)
	}
}
