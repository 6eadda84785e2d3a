package idemhttp_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"

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
