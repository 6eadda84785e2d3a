package idemhttp_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/internal/pgtest"
	"github.com/idemgo/idem/store/memstore"
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

// gatedCommit is a store whose Commit fails as an unreachable store's does
// until open is closed; it counts its Commit calls.
type gatedCommit struct {
	idem.Store
	open  chan struct{}
	calls atomic.Int32
}

func (s *gatedCommit) Commit(ctx context.Context, key idem.Key, lease idem.Lease, result []byte) error {
	s.calls.Add(1)
	select {
	case <-s.open:
		return s.Store.Commit(ctx, key, lease, result)
	default:
		return idem.Unavailable(errors.New("connection refused"))
	}
}

// TestResponseSentWhileItsCommitIsMadeAgain: while the Commit of a
// response of declared length (as NewProxy relays its upstream's) is made
// again through a store outage, the client gets the response at once
// rather than after the outage (or after StoreTimeout); once the store is
// back, the response is recorded and a retry replayed, the handler run
// once.
func TestResponseSentWhileItsCommitIsMadeAgain(t *testing.T) {
	mem, err := memstore.New(memstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	store := &gatedCommit{Store: mem, open: make(chan struct{})}
	var runs atomic.Int32
	const body = `{"id":1}`
	h := idemhttp.Middleware(idemhttp.Config{Store: store, StoreTimeout: 5 * time.Second})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, body)
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	post := func() (*http.Response, string, error) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/orders", strings.NewReader(`{}`))
		req.Header.Set("Idempotency-Key", "outage")
		res, err := srv.Client().Do(req)
		if err != nil {
			return nil, "", err
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		return res, string(b), err
	}
	type answer struct {
		res  *http.Response
		body string
		err  error
	}
	first := make(chan answer, 1)
	go func() {
		res, b, err := post()
		first <- answer{res, b, err}
	}()
	select {
	case a := <-first:
		if a.err != nil || a.res.StatusCode != http.StatusCreated || a.body != body {
			t.Fatalf("first request: %v, %q, %v; want 201 %s", a.res, a.body, a.err, body)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the response was held while its Commit was made again")
	}
	if store.calls.Load() < 1 {
		t.Fatal("no Commit was made")
	}
	close(store.open) // the store is back
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, b, err := post()
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode == http.StatusConflict && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond) // still being recorded
			continue
		}
		if res.StatusCode != http.StatusCreated || b != body || res.Header.Get(idemhttp.ReplayedHeader) != "true" || runs.Load() != 1 {
			t.Errorf("retry: %d %q, replayed %q, handler ran %d times; want the response replayed, one run", res.StatusCode, b, res.Header.Get(idemhttp.ReplayedHeader), runs.Load())
		}
		break
	}
}
