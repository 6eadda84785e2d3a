package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func newTestService(t *testing.T) (*service, *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	svc, err := newService(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	return svc, pool
}

func post(h http.Handler, key, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(body))
	r.Header.Set("Idempotency-Key", key)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func countOrders(t *testing.T, pool *pgxpool.Pool) int {
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM orders`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Fifty concurrent identical requests, retried on 409 like a client would:
// exactly one order row, and every client gets the same order; every
// answer but the first is marked Idempotent-Replayed: true, as idem proxy
// marks a replay.
func TestConcurrentRetriesCreateOneOrder(t *testing.T) {
	svc, pool := newTestService(t)
	var wg sync.WaitGroup
	bodies, replayed := make([]string, 50), make([]string, 50)
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				w := post(svc, "order-1", `{"sku":"book","qty":2}`)
				if w.Code == http.StatusConflict {
					time.Sleep(5 * time.Millisecond)
					continue
				}
				if w.Code != http.StatusCreated {
					t.Errorf("status %d: %s", w.Code, w.Body)
				}
				bodies[i], replayed[i] = w.Body.String(), w.Header().Get(idemhttp.ReplayedHeader)
				return
			}
		}()
	}
	wg.Wait()
	if n := countOrders(t, pool); n != 1 {
		t.Fatalf("%d order rows, want 1", n)
	}
	for _, b := range bodies {
		if b != bodies[0] {
			t.Fatalf("clients saw different orders: %q vs %q", b, bodies[0])
		}
	}
	fresh := 0
	for _, r := range replayed {
		switch r {
		case "":
			fresh++
		case "true":
		default:
			t.Errorf("%s: %q, want true or none", idemhttp.ReplayedHeader, r)
		}
	}
	if fresh != 1 {
		t.Errorf("%d answers without %s: true, want 1 (the request that created the order)", fresh, idemhttp.ReplayedHeader)
	}
	if w := post(svc, "order-1", `{"sku":"book","qty":2}`); w.Code != http.StatusCreated || w.Header().Get(idemhttp.ReplayedHeader) != "true" {
		t.Errorf("a later retry: %d, %s %q; want 201 and true", w.Code, idemhttp.ReplayedHeader, w.Header().Get(idemhttp.ReplayedHeader))
	}
	if w := post(svc, "order-1", `{"sku":"book","qty":3}`); w.Code != http.StatusUnprocessableEntity {
		t.Errorf("reused key: %d", w.Code)
	}
}

// A failing business write rolls back the record too: the retry runs.
func TestRollbackLeavesNoRecord(t *testing.T) {
	svc, pool := newTestService(t)
	if _, err := pool.Exec(context.Background(), `ALTER TABLE orders ADD CONSTRAINT qty_small CHECK (qty < 10)`); err != nil {
		t.Fatal(err)
	}
	if w := post(svc, "order-2", `{"sku":"pen","qty":50}`); w.Code != http.StatusServiceUnavailable {
		t.Fatalf("violating insert: %d %s", w.Code, w.Body)
	}
	if _, err := pool.Exec(context.Background(), `ALTER TABLE orders DROP CONSTRAINT qty_small`); err != nil {
		t.Fatal(err)
	}
	if w := post(svc, "order-2", `{"sku":"pen","qty":50}`); w.Code != http.StatusCreated || w.Header().Get(idemhttp.ReplayedHeader) != "" {
		t.Fatalf("retry after the rollback: %d %s, %s %q; want 201, not a replay", w.Code, w.Body, idemhttp.ReplayedHeader, w.Header().Get(idemhttp.ReplayedHeader))
	}
	if n := countOrders(t, pool); n != 1 {
		t.Fatalf("%d order rows, want 1", n)
	}
}

// A request without an Idempotency-Key is answered 400 with the problem
// type for a missing key, as idem proxy answers it, and creates nothing.
func TestMissingKey(t *testing.T) {
	svc, pool := newTestService(t)
	r := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(`{"sku":"book","qty":2}`))
	w := httptest.NewRecorder()
	svc.ServeHTTP(w, r)
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "urn:idem:problem:key-missing") {
		t.Fatalf("%d %s; want 400 and the key-missing problem", w.Code, w.Body)
	}
	if n := countOrders(t, pool); n != 0 {
		t.Fatalf("%d order rows, want 0", n)
	}
}

// A body over maxBody is answered 413 with the problem type for a body too
// large, as idem proxy answers it, without being read whole, and creates
// nothing.
func TestOversizedBody(t *testing.T) {
	svc, pool := newTestService(t)
	body := `{"sku":"` + strings.Repeat("a", maxBody) + `","qty":1}`
	if w := post(svc, "order-1", body); w.Code != http.StatusRequestEntityTooLarge || !strings.Contains(w.Body.String(), "urn:idem:problem:body-too-large") {
		t.Fatalf("%d %.200s; want 413 and the body-too-large problem", w.Code, w.Body)
	}
	if n := countOrders(t, pool); n != 0 {
		t.Fatalf("%d order rows, want 0", n)
	}
}
