package idemhttp_test

import (
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/store/pgstore"
)

// A handler whose statement failed (the transaction aborted) and that
// answers 400, a status that is recorded, cannot have it recorded: the
// transaction is rolled back and the client gets the 400 it wrote, not a
// 503 "retry later" that every retry would get again.
func TestTxFailureAnswerDeliveredWhenItCannotBeRecorded(t *testing.T) {
	e := newTxEnv(t)
	if _, err := e.pool.Exec(t.Context(), `ALTER TABLE orders ADD CONSTRAINT sku_short CHECK (length(sku) < 10)`); err != nil {
		t.Fatal(err)
	}
	h := e.handler(idemhttp.Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx := r.Context().Value(txKey{}).(pgx.Tx)
		if _, err := tx.Exec(r.Context(), `INSERT INTO orders (sku) VALUES ('far-too-long-a-sku')`); err == nil {
			t.Error("the insert did not fail")
		}
		http.Error(w, "invalid order", http.StatusBadRequest)
	}))
	for range 2 {
		w := postTx(h, "k-aborted", "x")
		if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "invalid order") {
			t.Fatalf("%d %s; want the handler's 400", w.Code, w.Body)
		}
		if ev := e.lastEvent(); ev.Outcome != idemhttp.OutcomeReleased || ev.Err == nil {
			t.Errorf("event %s %v; want released, with the record's error", ev.Outcome, ev.Err)
		}
	}
	e.noTxLeft()
	e.keyFree("k-aborted")
}

// A handler that commits the request's transaction itself (a misuse) has
// committed what it wrote, and the record in progress with it: the client
// is not told that the request had no effect.
func TestTxCommittedByTheHandlerIsNotNoEffect(t *testing.T) {
	e := newTxEnv(t)
	h := e.handler(idemhttp.Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx := r.Context().Value(txKey{}).(pgx.Tx)
		if _, err := tx.Exec(r.Context(), `INSERT INTO orders (sku) VALUES ('desk')`); err != nil {
			t.Error(err)
		}
		if err := tx.Commit(r.Context()); err != nil {
			t.Error(err)
		}
		w.WriteHeader(http.StatusCreated)
	}))
	w := postTx(h, "k-self-commit", "desk")
	if w.Code != http.StatusInternalServerError || !strings.Contains(w.Body.String(), idemhttp.ProblemInternal) || strings.Contains(w.Body.String(), "no effect") {
		t.Fatalf("%d %s; want a 500 internal problem that does not say the request had no effect", w.Code, w.Body)
	}
	if ev := e.lastEvent(); ev.Outcome != idemhttp.OutcomeInternal {
		t.Errorf("event %s, want internal", ev.Outcome)
	}
	if n := e.rows("desk"); n != 1 {
		t.Errorf("%d rows; the handler's own commit made 1", n)
	}
	e.noTxLeft()
}

// A handler that commits the request's transaction itself and answers a
// success that cannot be recorded (over MaxCapture) has committed what it
// wrote: the 500 does not tell the client that the request had no effect.
func TestTxCommittedByTheHandlerUnrecordedIsNotNoEffect(t *testing.T) {
	e := newTxEnv(t)
	h := e.handler(idemhttp.Config{MaxCapture: 10}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx := r.Context().Value(txKey{}).(pgx.Tx)
		if _, err := tx.Exec(r.Context(), `INSERT INTO orders (sku) VALUES ('shelf')`); err != nil {
			t.Error(err)
		}
		if err := tx.Commit(r.Context()); err != nil {
			t.Error(err)
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(strings.Repeat("x", 100)))
	}))
	w := postTx(h, "k-self-commit-big", "shelf")
	if w.Code != http.StatusInternalServerError || !strings.Contains(w.Body.String(), idemhttp.ProblemInternal) || strings.Contains(w.Body.String(), "no effect") {
		t.Fatalf("%d %s; want a 500 internal problem that does not say the request had no effect", w.Code, w.Body)
	}
	if ev := e.lastEvent(); ev.Outcome != idemhttp.OutcomeReleased || ev.Err == nil {
		t.Errorf("event %s %v; want released, with the rollback's error", ev.Outcome, ev.Err)
	}
	if n := e.rows("shelf"); n != 1 {
		t.Errorf("%d rows; the handler's own commit made 1", n)
	}
	e.noTxLeft()
}

// A handler that commits the request's transaction itself and answers a
// success whose record the store refuses (larger than its MaxPayload) has
// committed what it wrote: the client is not told that the request had no
// effect, nor to retry it, which would run it again once the key's
// reservation, committed with it, lapsed.
func TestTxCommittedByTheHandlerRecordRefusedIsNotNoEffect(t *testing.T) {
	e := newTxEnvWith(t, pgstore.Config{MaxPayload: 1024})
	h := e.handler(idemhttp.Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx := r.Context().Value(txKey{}).(pgx.Tx)
		if _, err := tx.Exec(r.Context(), `INSERT INTO orders (sku) VALUES ('bench')`); err != nil {
			t.Error(err)
		}
		if err := tx.Commit(r.Context()); err != nil {
			t.Error(err)
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(strings.Repeat("x", 2000)))
	}))
	w := postTx(h, "k-self-commit-refused", "bench")
	if w.Code != http.StatusInternalServerError || !strings.Contains(w.Body.String(), idemhttp.ProblemInternal) || strings.Contains(w.Body.String(), "no effect") {
		t.Fatalf("%d %s; want a 500 internal problem that does not say the request had no effect", w.Code, w.Body)
	}
	if ev := e.lastEvent(); ev.Outcome != idemhttp.OutcomeInternal || !errors.As(ev.Err, new(*idem.PayloadTooLargeError)) {
		t.Errorf("event %s %v; want internal, with the record's error", ev.Outcome, ev.Err)
	}
	if n := e.rows("bench"); n != 1 {
		t.Errorf("%d rows; the handler's own commit made 1", n)
	}
	e.noTxLeft()
}

// A request meeting another's open transaction on its key is told to
// retry soon: no lease runs in transaction mode, whatever the store's
// Lease says.
func TestTxInFlightRetryAfterIsShort(t *testing.T) {
	e := newTxEnv(t)
	release := make(chan struct{})
	var once sync.Once
	defer once.Do(func() { close(release) })
	started := make(chan struct{}, 1)
	h := e.handler(idemhttp.Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-release
		insert(http.StatusCreated).ServeHTTP(w, r)
	}))
	done := make(chan struct{})
	go func() { defer close(done); postTx(h, "k-busy", "lamp") }()
	<-started
	w := postTx(h, "k-busy", "lamp")
	if w.Code != http.StatusConflict || w.Header().Get("Retry-After") != "1" {
		t.Errorf("%d, Retry-After %q; want 409 with Retry-After 1", w.Code, w.Header().Get("Retry-After"))
	}
	once.Do(func() { close(release) })
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the first request did not end")
	}
	e.noTxLeft()
}
