// Package readme runs the Go snippets of the repository's README.md as they
// are written there, against real stores, so that a snippet that stops
// compiling, or stops doing what the README says it does, fails a test.
package readme

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/internal/pgtest"
	"github.com/idemgo/idem/internal/testserver"
	"github.com/idemgo/idem/store/pgstore"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

type ChargeRequest struct {
	Customer string `json:"customer"`
	Amount   int    `json:"amount"`
}

type Charge struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"`
}

// provider is the payment provider the handler charges: it counts the
// charges it made.
type provider struct {
	made    atomic.Int64
	charged func() // called after each charge, when set
}

func (p *provider) Charge(ctx context.Context, req ChargeRequest) (Charge, error) {
	n := p.made.Add(1)
	if p.charged != nil {
		p.charged()
	}
	return Charge{ID: fmt.Sprintf("ch_%d", n), Amount: req.Amount}, nil
}

// callerHeader stands in for the caller's authenticated identity, which a
// real service takes from its authentication middleware.
const callerHeader = "X-Caller"

// chargeHandler is the "In the handler" part of the README's library
// snippet, with the status codes its comments name.
func chargeHandler(store idem.Store, payments *provider) http.HandlerFunc {
	charges := idem.MustNamespace("charges")
	return func(w http.ResponseWriter, r *http.Request) {
		var req ChargeRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		callerID := r.Header.Get(callerHeader)

		key, err := idem.ParseHeader(charges, r.Header.Values(idem.HeaderName))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		key, err = key.WithScope(callerID) // the authenticated caller: nobody sees another's records
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		ctx := context.WithoutCancel(r.Context()) // a client that hangs up does not cut the work short
		charge, err := idem.Do(ctx, store, key, req, func(ctx context.Context) (Charge, error) {
			return payments.Charge(ctx, req) // runs once per key; a retry gets the recorded result
		}, nil)
		switch {
		case errors.Is(err, idem.ErrInFlight):
			http.Error(w, err.Error(), http.StatusConflict)
		case errors.Is(err, idem.ErrMismatch):
			http.Error(w, err.Error(), http.StatusUnprocessableEntity)
		case errors.Is(err, idem.ErrUnavailable):
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		case err != nil:
			http.Error(w, err.Error(), http.StatusInternalServerError)
		default:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			_ = json.NewEncoder(w).Encode(charge)
		}
	}
}

// newStore is the "At start-up, once" part of the snippet.
func newStore(t *testing.T, pool *pgxpool.Pool) *pgstore.Store {
	t.Helper()
	ctx := context.Background()
	store, err := pgstore.New(pool, pgstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return store
}

func newPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func postCharge(h http.Handler, caller, key, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "/charges", strings.NewReader(body))
	r.Header.Set(idem.HeaderName, key)
	r.Header.Set(callerHeader, caller)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// A retry is answered from the record, and the same key with another
// request is a mismatch: the provider is charged once.
func TestReadmeHandlerReplaysRetries(t *testing.T) {
	payments := &provider{}
	h := chargeHandler(newStore(t, newPool(t, pgtest.URL(t))), payments)
	first := postCharge(h, "alice", "order-1", `{"customer":"c1","amount":500}`)
	retry := postCharge(h, "alice", "order-1", `{"amount":500,"customer":"c1"}`)
	if first.Code != http.StatusCreated || retry.Code != http.StatusCreated || first.Body.String() != retry.Body.String() {
		t.Fatalf("first %d %s, retry %d %s; want the same 201 twice", first.Code, first.Body, retry.Code, retry.Body)
	}
	if w := postCharge(h, "alice", "order-1", `{"customer":"c1","amount":501}`); w.Code != http.StatusUnprocessableEntity {
		t.Fatalf("another body with the key: %d %s, want 422", w.Code, w.Body)
	}
	if n := payments.made.Load(); n != 1 {
		t.Fatalf("%d charges made, want 1", n)
	}
}

// Two callers who happen to send the same key value are two operations:
// neither is answered with the other's recorded charge, nor told that its
// request mismatches the other's.
func TestReadmeHandlerKeepsCallersApart(t *testing.T) {
	payments := &provider{}
	h := chargeHandler(newStore(t, newPool(t, pgtest.URL(t))), payments)
	alice := postCharge(h, "alice", "order-1", `{"customer":"alice","amount":500}`)
	bob := postCharge(h, "bob", "order-1", `{"customer":"alice","amount":500}`)
	if alice.Code != http.StatusCreated || bob.Code != http.StatusCreated {
		t.Fatalf("alice %d %s, bob %d %s; want 201 each", alice.Code, alice.Body, bob.Code, bob.Body)
	}
	if alice.Body.String() == bob.Body.String() {
		t.Fatalf("bob got alice's charge %s: keys are not scoped by caller", bob.Body)
	}
	if w := postCharge(h, "bob", "order-1", `{"customer":"bob","amount":900}`); w.Code != http.StatusUnprocessableEntity {
		t.Fatalf("bob reusing his key with another body: %d %s, want 422", w.Code, w.Body)
	}
	if w := postCharge(h, "carol", "order-1", `{"customer":"carol","amount":900}`); w.Code != http.StatusCreated {
		t.Fatalf("carol's first request with the key: %d %s, want 201 (another caller's records are not hers to mismatch)", w.Code, w.Body)
	}
	if n := payments.made.Load(); n != 3 {
		t.Fatalf("%d charges made, want 3 (one per caller)", n)
	}
}

// A store that cannot be reached answers 503 (errors.Is(err,
// idem.ErrUnavailable)) and the provider is not charged.
func TestReadmeHandlerStoreDown(t *testing.T) {
	port, err := testserver.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	pool := newPool(t, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?connect_timeout=5", port))
	store, err := pgstore.New(pool, pgstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	payments := &provider{}
	w := postCharge(chargeHandler(store, payments), "alice", "order-1", `{"customer":"c1","amount":500}`)
	if w.Code != http.StatusServiceUnavailable {
		t.Fatalf("store down: %d %s, want 503", w.Code, w.Body)
	}
	if n := payments.made.Load(); n != 0 {
		t.Fatalf("%d charges made with the store down, want 0", n)
	}
}

// A store lost after the charge was made: the charge happened but is not
// recorded, and the handler's ErrUnavailable case answers 503, as the
// README says. The release of the key failed with the store, so once the
// store is back a retry finds the key still reserved (409) until its lease
// lapses, and is never answered from a record that does not exist.
func TestReadmeHandlerStoreLostAfterCharge(t *testing.T) {
	srv := pgtest.Start(t)
	store := newStore(t, newPool(t, srv.URL()))
	payments := &provider{}
	payments.charged = func() {
		if err := srv.Stop(); err != nil {
			t.Error(err)
		}
	}
	h := chargeHandler(store, payments)
	if w := postCharge(h, "alice", "order-1", `{"customer":"c1","amount":500}`); w.Code != http.StatusServiceUnavailable {
		t.Fatalf("store lost after the charge: %d %s, want 503", w.Code, w.Body)
	}
	if n := payments.made.Load(); n != 1 {
		t.Fatalf("%d charges made, want 1", n)
	}
	payments.charged = nil
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	if w := postCharge(h, "alice", "order-1", `{"customer":"c1","amount":500}`); w.Code != http.StatusConflict {
		t.Fatalf("retry once the store is back: %d %s, want 409 until the unreleased lease lapses", w.Code, w.Body)
	}
	if n := payments.made.Load(); n != 1 {
		t.Fatalf("%d charges made, want 1", n)
	}
}

type OrderRequest struct {
	SKU string `json:"sku"`
}

type Order struct {
	ID int64 `json:"id"`
}

var errOutOfStock = errors.New("out of stock")

// insertOrder writes the order row in tx, and then fails permanently when
// the order is for the SKU "gone": the row is written before the failure,
// as the README's "whatever the function wrote before it failed" supposes.
func insertOrder(ctx context.Context, tx pgx.Tx, req OrderRequest) (Order, error) {
	var o Order
	if err := tx.QueryRow(ctx, `INSERT INTO orders (sku) VALUES ($1) RETURNING id`, req.SKU).Scan(&o.ID); err != nil {
		return Order{}, err
	}
	switch req.SKU {
	case "gone":
		return Order{}, idem.Permanent("out_of_stock", errOutOfStock)
	case "gone-unrecordable": // a failure too large to record
		return Order{}, idem.Permanent("out_of_stock", fmt.Errorf("%w: %s", errOutOfStock, strings.Repeat("x", idem.DefaultMaxPayload)))
	}
	return o, nil
}

func newOrdersStore(t *testing.T) (*pgxpool.Pool, *pgstore.Store) {
	t.Helper()
	pool := newPool(t, pgtest.URL(t))
	if _, err := pool.Exec(context.Background(), `CREATE TABLE orders (id bigserial PRIMARY KEY, sku text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return pool, newStore(t, pool)
}

func countOrders(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM orders`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// The README's "Outside HTTP" snippet, as written: the order and the record
// commit together, a retry replays the order; an error, a permanent one
// too, rolls both back, so a retry runs the function again.
func TestReadmeDoInTransaction(t *testing.T) {
	pool, store := newOrdersStore(t)
	ctx := context.Background()
	ns := idem.MustNamespace("orders")
	place := func(key idem.Key, req OrderRequest) (Order, error) {
		var order Order
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			var err error
			order, err = idem.Do(ctx, store.WithTx(tx), key, req, func(ctx context.Context) (Order, error) {
				return insertOrder(ctx, tx, req) // same transaction as the idempotency record
			}, nil)
			return err // an error rolls back the order and the record together
		})
		return order, err
	}
	key, _ := idem.NewKey(ns, "order-1")
	first, err := place(key, OrderRequest{SKU: "book"})
	if err != nil {
		t.Fatal(err)
	}
	again, err := place(key, OrderRequest{SKU: "book"})
	if err != nil || again != first {
		t.Fatalf("retry: %+v, %v; want %+v replayed", again, err, first)
	}
	if n := countOrders(t, pool); n != 1 {
		t.Fatalf("%d order rows, want 1", n)
	}

	gone, _ := idem.NewKey(ns, "order-2")
	for i := range 2 {
		if _, err := place(gone, OrderRequest{SKU: "gone"}); !errors.Is(err, errOutOfStock) {
			t.Fatalf("attempt %d: %v, want the function's own permanent failure (not recorded, so run again)", i+1, err)
		}
	}
	if n := countOrders(t, pool); n != 1 {
		t.Fatalf("%d order rows after the rolled-back failures, want 1", n)
	}
}

// placeRecordingFailures runs the README's recipe for recording a
// permanent failure in the "Outside HTTP" form: Do's error is kept outside
// the closure, and the transaction commits when it is a permanent failure
// that was recorded. runs counts the function's runs.
func placeRecordingFailures(ctx context.Context, pool *pgxpool.Pool, store *pgstore.Store, key idem.Key, req OrderRequest, runs *int) error {
	var runErr error
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, runErr = idem.Do(ctx, store.WithTx(tx), key, req, func(ctx context.Context) (Order, error) {
			*runs++
			return insertOrder(ctx, tx, req)
		}, nil)
		if idem.IsPermanent(runErr) && !errors.Is(runErr, idem.ErrNotRecorded) {
			return nil
		}
		return runErr
	})
	if err != nil {
		return err
	}
	return runErr
}

// The README's recipe records a permanent failure with what the function
// wrote, and a retry gets it back as a *idem.StoredError without running
// the function.
func TestReadmeDoInTransactionRecordsPermanentFailure(t *testing.T) {
	pool, store := newOrdersStore(t)
	ctx := context.Background()
	key, _ := idem.NewKey(idem.MustNamespace("orders"), "order-3")
	runs := 0
	if err := placeRecordingFailures(ctx, pool, store, key, OrderRequest{SKU: "gone"}, &runs); !errors.Is(err, errOutOfStock) {
		t.Fatalf("first: %v, want the permanent failure", err)
	}
	var stored *idem.StoredError
	if err := placeRecordingFailures(ctx, pool, store, key, OrderRequest{SKU: "gone"}, &runs); !errors.As(err, &stored) || stored.Class != "out_of_stock" {
		t.Fatalf("retry: %v, want the recorded failure as a *idem.StoredError of class out_of_stock", err)
	}
	if runs != 1 {
		t.Fatalf("the function ran %d times, want 1", runs)
	}
	if n := countOrders(t, pool); n != 1 {
		t.Fatalf("%d order rows, want 1 (what the function wrote before it failed commits with the failure)", n)
	}
}

// A permanent failure the store cannot record (its message is over the
// store's MaxPayload) is not committed by the README's recipe: what the
// function wrote rolls back, and a retry runs it again. Committed, the
// order would stand with no record, and the retry would place it twice.
func TestReadmeDoInTransactionRollsBackAnUnrecordedFailure(t *testing.T) {
	pool, store := newOrdersStore(t)
	ctx := context.Background()
	key, _ := idem.NewKey(idem.MustNamespace("orders"), "order-4")
	runs := 0
	for i := range 2 {
		err := placeRecordingFailures(ctx, pool, store, key, OrderRequest{SKU: "gone-unrecordable"}, &runs)
		if !errors.Is(err, errOutOfStock) || !errors.Is(err, idem.ErrNotRecorded) {
			t.Fatalf("attempt %d: %.200v, want the permanent failure, not recorded", i+1, err)
		}
	}
	if runs != 2 {
		t.Fatalf("the function ran %d times, want 2 (nothing recorded, so run again)", runs)
	}
	if n := countOrders(t, pool); n != 0 {
		t.Fatalf("%d order rows, want 0 (each unrecorded failure rolled back)", n)
	}
}
