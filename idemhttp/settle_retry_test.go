package idemhttp_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/internal/pgtest"
	"github.com/idemgo/idem/store/pgstore"
)

// TestResponseRecordedAfterTheStoresConnectionDropped: when the store's
// connections drop while the handler runs (a PostgreSQL backend
// terminated, a failover), the call recording the response fails once
// and is made again on a new connection, under the same lease: the
// response is recorded and a retry replayed, rather than the key released
// for the retry to run the handler a second time.
func TestResponseRecordedAfterTheStoresConnectionDropped(t *testing.T) {
	for _, pipeline := range []bool{false, true} {
		t.Run(fmt.Sprintf("pipeline=%v", pipeline), func(t *testing.T) {
			ctx := context.Background()
			pool, drop := pgtest.DroppablePool(t)
			store, err := pgstore.New(pool, pgstore.Config{Pipeline: pipeline})
			if err != nil {
				t.Fatal(err)
			}
			if err := store.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			var runs atomic.Int32
			h := idemhttp.Middleware(idemhttp.Config{Store: store})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := runs.Add(1)
				if drop() == 0 { // every connection of the store's pool
					t.Error("no connection of the store's pool to drop")
				}
				w.WriteHeader(http.StatusCreated)
				fmt.Fprintf(w, `{"run":%d}`, n)
			}))
			send := func() (int, string, string) {
				req := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(`{"sku":"a"}`))
				req.Header.Set("Idempotency-Key", "dropped")
				req.Header.Set("Content-Type", "application/json")
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				body, _ := io.ReadAll(rec.Body)
				return rec.Code, string(body), rec.Header().Get(idemhttp.ReplayedHeader)
			}
			if code, body, _ := send(); code != http.StatusCreated || body != `{"run":1}` {
				t.Fatalf("first request: %d %s; want 201 {\"run\":1}", code, body)
			}
			code, body, replayed := send()
			if code != http.StatusCreated || body != `{"run":1}` || replayed != "true" || runs.Load() != 1 {
				t.Errorf("retry: %d %s, replayed %q, handler ran %d times; want the first response replayed, one run", code, body, replayed, runs.Load())
			}
		})
	}
}
