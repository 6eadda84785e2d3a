package idemhttp_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"time"

	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/store/memstore"
)

// Wrap an API handler: a retried POST with the same Idempotency-Key is
// answered from the record, and the handler runs once.
func ExampleNew() {
	store, _ := memstore.New(memstore.Config{}) // or sqlitestore, pgstore, redisstore
	mw, err := idemhttp.New(idemhttp.Config{Store: store, RequireKey: true})
	if err != nil {
		panic(err)
	}
	charges := 0
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		charges++
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":"ch_%d"}`, charges)
	})
	srv := httptest.NewServer(mw(api))
	defer srv.Close()

	post := func(key, body string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/charges", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		fmt.Printf("%d replayed=%q %s\n", res.StatusCode, res.Header.Get("Idempotent-Replayed"), strings.TrimSpace(string(b)))
	}
	post("order-1", `{"amount":500}`)
	post("order-1", `{ "amount": 500 }`) // same request, other spacing: replayed
	post("", `{"amount":500}`)           // no key: rejected
	fmt.Println("charges:", charges)
	// Output:
	// 201 replayed="" {"id":"ch_1"}
	// 201 replayed="true" {"id":"ch_1"}
	// 400 replayed="" {"type":"urn:idem:problem:key-missing","title":"Idempotency-Key header missing","status":400,"detail":"This request requires an Idempotency-Key header."}
	// charges: 1
}

// Put Idempotency-Key semantics in front of any HTTP API: what idem proxy
// runs.
func ExampleNewProxy() {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "created\n")
	}))
	defer upstream.Close()
	u, _ := url.Parse(upstream.URL)
	store, _ := memstore.New(memstore.Config{})
	proxy, err := idemhttp.NewProxy(idemhttp.ProxyConfig{Upstream: u, Middleware: idemhttp.Config{Store: store}})
	if err != nil {
		panic(err)
	}
	front := httptest.NewServer(proxy)
	defer front.Close()
	for range 2 {
		req, _ := http.NewRequest(http.MethodPost, front.URL+"/things", strings.NewReader("x"))
		req.Header.Set("Idempotency-Key", `"k-1"`)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		res.Body.Close()
		fmt.Printf("%d replayed=%q\n", res.StatusCode, res.Header.Get("Idempotent-Replayed"))
	}
	// Output:
	// 201 replayed=""
	// 201 replayed="true"
}

// callerKey is the context key under which the example's authentication
// middleware stores the caller's id.
type callerKey struct{}

// An API that authenticates by something other than the Authorization
// header (here an API-key header) scopes keys by the authenticated caller:
// its authentication runs first and KeyScope reads what it found. Without
// it, every caller would share one scope, and one caller's key would replay
// (or, with another body, refuse) another's request.
func ExampleConfig_keyScope() {
	store, _ := memstore.New(memstore.Config{})
	mw, err := idemhttp.New(idemhttp.Config{
		Store:    store,
		KeyScope: func(r *http.Request) string { return r.Context().Value(callerKey{}).(string) },
	})
	if err != nil {
		panic(err)
	}
	authenticate := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			caller := map[string]string{"key-a": "alice", "key-b": "bob"}[r.Header.Get("X-Api-Key")]
			if caller == "" {
				http.Error(w, "unknown API key", http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, caller)))
		})
	}
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "order for %s", r.Context().Value(callerKey{}))
	})
	h := authenticate(mw(api)) // authentication outside, idempotency inside

	for _, apiKey := range []string{"key-a", "key-b", "key-a"} {
		req := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(`{"item":1}`))
		req.Header.Set("X-Api-Key", apiKey)
		req.Header.Set("Idempotency-Key", "order-1") // the same key from both callers
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		fmt.Printf("%s: %d replayed=%q %s\n", apiKey, rec.Code, rec.Header().Get(idemhttp.ReplayedHeader), rec.Body)
	}
	// Output:
	// key-a: 200 replayed="" order for alice
	// key-b: 200 replayed="" order for bob
	// key-a: 200 replayed="true" order for alice
}

// Records outlive their retention until the store's PurgeExpired deletes
// them (except on Redis): run it now and then beside the server, for the
// middleware's namespace. A service would run purge from a goroutine on a
// time.Ticker, as idem proxy does every 10 minutes.
func ExampleNew_purge() {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC) // a fake clock, for the example
	store, _ := memstore.New(memstore.Config{Now: func() time.Time { return now }})
	mw, _ := idemhttp.New(idemhttp.Config{Store: store, Retention: time.Hour})
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
	}))
	req := httptest.NewRequest(http.MethodPost, "/things", nil)
	req.Header.Set("Idempotency-Key", "k-1")
	h.ServeHTTP(httptest.NewRecorder(), req)

	purge := func() {
		n, err := store.PurgeExpired(ctx, idemhttp.DefaultNamespace, now) // or Config.Namespace
		fmt.Println("purged", n, err)
	}
	purge()                      // the record is still live
	now = now.Add(2 * time.Hour) // past its retention
	purge()
	// Output:
	// purged 0 <nil>
	// purged 1 <nil>
}
