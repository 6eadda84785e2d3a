package readme

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/store/pgstore"
)

// txKey is the context key under which the README's BeginTx snippet hands
// the handler its transaction.
type txKey struct{}

// readmeTxMiddleware is the README's transaction-mode snippet, as written.
func readmeTxMiddleware(pool *pgxpool.Pool, store *pgstore.Store) (func(http.Handler) http.Handler, error) {
	mw, err := idemhttp.New(idemhttp.Config{RequireKey: true,
		BeginTx: func(r *http.Request) (*idemhttp.Tx, error) {
			tx, err := pool.Begin(r.Context())
			if err != nil {
				return nil, err
			}
			return &idemhttp.Tx{Store: store.WithTx(tx), Commit: tx.Commit, Rollback: tx.Rollback,
				Context: context.WithValue(r.Context(), txKey{}, tx)}, nil // the handler's tx
		}})
	return mw, err
}

// ordersHandler inserts an order in the transaction the snippet put in the
// request's context; an order for the SKU "fail" is inserted and then
// answered 503, which the middleware does not record: it rolls back.
func ordersHandler(w http.ResponseWriter, r *http.Request) {
	tx, ok := r.Context().Value(txKey{}).(pgx.Tx)
	if !ok {
		http.Error(w, "no transaction", http.StatusInternalServerError)
		return
	}
	var req OrderRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	o, err := insertOrder(r.Context(), tx, req)
	if err != nil || req.SKU == "fail" {
		http.Error(w, "try again", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(o)
}

// The README's BeginTx snippet, as written: a keyed POST's order and its
// record commit together and a retry is replayed from the record; a
// response the middleware does not record rolls the order back with the
// reservation, so a retry runs again; a POST without a key is refused
// (RequireKey) and writes nothing.
func TestReadmeBeginTx(t *testing.T) {
	pool, store := newOrdersStore(t)
	mw, err := readmeTxMiddleware(pool, store)
	if err != nil {
		t.Fatal(err)
	}
	h := mw(http.HandlerFunc(ordersHandler))
	post := func(key, body string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		if key != "" {
			r.Header.Set("Idempotency-Key", key)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}

	first := post("o-1", `{"sku":"book"}`)
	retry := post("o-1", `{"sku":"book"}`)
	if first.Code != http.StatusCreated || retry.Code != http.StatusCreated || retry.Body.String() != first.Body.String() || retry.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatalf("first %d %s, retry %d %s (Idempotent-Replayed %q); want the same 201, replayed", first.Code, first.Body, retry.Code, retry.Body, retry.Header().Get("Idempotent-Replayed"))
	}
	if n := countOrders(t, pool); n != 1 {
		t.Fatalf("%d order rows after a POST and its retry, want 1", n)
	}

	for i := range 2 {
		if w := post("o-2", `{"sku":"fail"}`); w.Code != http.StatusServiceUnavailable {
			t.Fatalf("attempt %d: %d %s, want the handler's 503", i+1, w.Code, w.Body)
		}
	}
	if n := countOrders(t, pool); n != 1 {
		t.Fatalf("%d order rows after two unrecorded 503s, want 1 (each rolled back)", n)
	}

	if w := post("", `{"sku":"book"}`); w.Code != http.StatusBadRequest {
		t.Fatalf("POST without a key: %d %s, want 400", w.Code, w.Body)
	}
	if n := countOrders(t, pool); n != 1 {
		t.Fatalf("%d order rows after a POST without a key, want 1", n)
	}
}
