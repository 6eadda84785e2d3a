package bench

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/store/memstore"
)

// apiHandler is the bare handler the middleware wraps: it reads the body
// and answers a small JSON document, like a typical POST endpoint.
var apiHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = io.WriteString(w, `{"id":"ch_1","amount":100,"currency":"EUR"}`)
})

const benchBody = `{"amount":100,"currency":"EUR","customer":"cus_123","metadata":{"order":"1001"}}`

func newMiddleware(b *testing.B) http.Handler {
	return newMiddlewareOn(b, memstore.Config{})
}

func newMiddlewareOn(b *testing.B, cfg memstore.Config) http.Handler {
	s, err := memstore.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	mw, err := idemhttp.New(idemhttp.Config{Store: s})
	if err != nil {
		b.Fatal(err)
	}
	return mw(apiHandler)
}

// reusable is one request served again and again with a new key each
// time, so that the benchmark's own garbage stays small and the
// measurement is the middleware's.
type reusable struct {
	r    *http.Request
	body *strings.Reader
	rc   bodyCloser
}

type bodyCloser struct{ *strings.Reader }

func (bodyCloser) Close() error { return nil }

func newReusable() *reusable {
	u := &reusable{r: httptest.NewRequest(http.MethodPost, "/v1/charges", nil), body: strings.NewReader(benchBody)}
	u.rc = bodyCloser{u.body}
	u.r.Header.Set("Content-Type", "application/json")
	u.r.Header.Set("Authorization", "Bearer sk_test_123")
	u.r.Header.Set("Idempotency-Key", "")
	return u
}

// next readies the request for another serving with key.
func (u *reusable) next(key string) *http.Request {
	u.body.Reset(benchBody)
	u.r.Body, u.r.GetBody, u.r.ContentLength = u.rc, nil, int64(len(benchBody))
	u.r.Header["Idempotency-Key"][0] = key
	return u.r
}

func benchKeys(n int) []string {
	ks := make([]string, n)
	for i := range ks {
		ks[i] = "k-" + strconv.Itoa(i)
	}
	return ks
}

// BenchmarkMiddlewareFirstRequest: a POST with a new key, through the
// middleware on memstore, in the steady state of a server that has run
// longer than its retention: records expire (the store's clock advances
// 1 ms per request, retention is 60 s) and, as idem proxy does, a purge
// runs now and then (every 4,096 requests, inside the timing), so the
// store holds about 60,000 records. "overhead-ns/op" is the time over the
// bare handler measured in the same run on the same requests.
func BenchmarkMiddlewareFirstRequest(b *testing.B) {
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	s, err := memstore.New(memstore.Config{Now: now, Retention: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	mw, err := idemhttp.New(idemhttp.Config{Store: s})
	if err != nil {
		b.Fatal(err)
	}
	h := mw(apiHandler)
	// Fill the store to its steady size first.
	u := newReusable()
	w := httptest.NewRecorder()
	for i := range 60_000 {
		clock.Add(int64(time.Millisecond))
		h.ServeHTTP(w, u.next("fill-"+strconv.Itoa(i)))
	}
	serveNewKeys(b, h, u, func(i int) {
		if clock.Add(int64(time.Millisecond)); i%4096 == 0 {
			if _, err := s.PurgeExpired(context.Background(), idemhttp.DefaultNamespace, now()); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// serveNewKeys times b.N requests through h, each with a new key, calling
// before(i) ahead of the i-th, and reports the overhead over the bare
// handler.
func serveNewKeys(b *testing.B, h http.Handler, u *reusable, before func(i int)) {
	ks := benchKeys(b.N)
	w := httptest.NewRecorder()
	b.ReportAllocs()
	var ms runtimeMem
	ms.read()
	b.ResetTimer()
	for i := range b.N {
		before(i)
		w.Body.Reset()
		clear(w.Header())
		h.ServeHTTP(w, u.next(ks[i]))
	}
	b.StopTimer()
	reportOverhead(b, u, func(i int) string { return ks[i] }, ms)
}

// BenchmarkMiddlewareFirstRequestGrowingStore: the same with every record
// kept, so that the store grows to b.N records; the figure includes what
// growing the heap costs (fresh pages, map growth), which a server pays
// only until its records start to expire.
func BenchmarkMiddlewareFirstRequestGrowingStore(b *testing.B) {
	serveNewKeys(b, newMiddleware(b), newReusable(), func(int) {})
}

// BenchmarkMiddlewareFirstRequestNullStore: the same with a store that
// does no work (Begin answers Fresh, Commit succeeds, nothing is kept), to
// tell the middleware's own time from the store's.
func BenchmarkMiddlewareFirstRequestNullStore(b *testing.B) {
	mw, err := idemhttp.New(idemhttp.Config{Store: nullStore{}})
	if err != nil {
		b.Fatal(err)
	}
	serveNewKeys(b, mw(apiHandler), newReusable(), func(int) {})
}

// nullStore is an idem.Store that keeps nothing: every Begin is Fresh,
// every Commit and Heartbeat succeeds. Its other methods are not called.
type nullStore struct{ idem.Store }

func (nullStore) Begin(context.Context, idem.Key, idem.Request, *idem.BeginOpts) (idem.Outcome, error) {
	return idem.Outcome{Kind: idem.Fresh, Lease: nullLease}, nil
}

func (nullStore) Commit(context.Context, idem.Key, idem.Lease, []byte) error { return nil }

func (nullStore) Heartbeat(_ context.Context, _ idem.Key, l idem.Lease, _ time.Duration) (idem.Lease, error) {
	return l, nil
}

var nullLease = idem.Lease{Token: "null", Fence: 1, ExpiresAt: time.Now().Add(24 * time.Hour), TTL: time.Minute}

// BenchmarkMiddlewareReplay: a retried POST answered from the record.
func BenchmarkMiddlewareReplay(b *testing.B) {
	h := newMiddleware(b)
	u := newReusable()
	h.ServeHTTP(httptest.NewRecorder(), u.next("replay-1"))
	// One key for every request: no slice of b.N keys for the collector to
	// scan on every cycle the middleware's garbage triggers.
	ks := func(int) string { return "replay-1" }
	w := httptest.NewRecorder()
	b.ReportAllocs()
	var ms runtimeMem
	ms.read()
	b.ResetTimer()
	for i := range b.N {
		w.Body.Reset()
		clear(w.Header())
		h.ServeHTTP(w, u.next(ks(i)))
		if i == 0 && w.Header().Get("Idempotent-Replayed") != "true" {
			b.Fatal("not a replay")
		}
	}
	b.StopTimer()
	reportOverhead(b, u, ks, ms)
}

// reportOverhead serves the same requests (the i-th with key ks(i)) with
// the bare handler and reports the middleware's time and allocations over
// it. start is the allocator's state before the middleware's loop.
func reportOverhead(b *testing.B, u *reusable, ks func(i int) string, start runtimeMem) {
	own := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	w := httptest.NewRecorder()
	var ms0, ms1 runtimeMem
	ms0.read()
	ownAllocs := float64(ms0.mallocs-start.mallocs) / float64(b.N)
	t0 := time.Now()
	for i := range b.N {
		w.Body.Reset()
		clear(w.Header())
		apiHandler.ServeHTTP(w, u.next(ks(i)))
	}
	bare := float64(time.Since(t0).Nanoseconds()) / float64(b.N)
	ms1.read()
	b.ReportMetric(own-bare, "overhead-ns/op")
	b.ReportMetric(bare, "bare-ns/op")
	bareAllocs := float64(ms1.mallocs-ms0.mallocs) / float64(b.N)
	b.ReportMetric(bareAllocs, "bare-allocs/op")
	b.ReportMetric(ownAllocs-bareAllocs, "overhead-allocs/op")
}
