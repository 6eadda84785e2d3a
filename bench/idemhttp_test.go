package bench

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

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
	s, err := memstore.New(memstore.Config{})
	if err != nil {
		b.Fatal(err)
	}
	mw, err := idemhttp.New(idemhttp.Config{Store: s})
	if err != nil {
		b.Fatal(err)
	}
	return mw(apiHandler)
}

func requests(n int, key func(i int) string) []*http.Request {
	reqs := make([]*http.Request, n)
	for i := range reqs {
		r := httptest.NewRequest(http.MethodPost, "/v1/charges", strings.NewReader(benchBody))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Authorization", "Bearer sk_test_123")
		if k := key(i); k != "" {
			r.Header.Set("Idempotency-Key", k)
		}
		reqs[i] = r
	}
	return reqs
}

func resetBodies(reqs []*http.Request) {
	for _, r := range reqs {
		r.Body = io.NopCloser(strings.NewReader(benchBody))
	}
}

// BenchmarkMiddlewareFirstRequest: a POST with a new key, through the
// middleware on memstore. "overhead-ns/op" is the time over the bare handler
// measured in the same run on the same requests.
func BenchmarkMiddlewareFirstRequest(b *testing.B) {
	h := newMiddleware(b)
	reqs := requests(b.N, func(i int) string { return "k-" + strconv.Itoa(i) })
	w := httptest.NewRecorder()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		w.Body.Reset()
		clear(w.Header())
		h.ServeHTTP(w, reqs[i])
	}
	b.StopTimer()
	reportOverhead(b, reqs)
}

// BenchmarkMiddlewareReplay: a retried POST answered from the record.
func BenchmarkMiddlewareReplay(b *testing.B) {
	h := newMiddleware(b)
	first := requests(1, func(int) string { return "replay-1" })
	h.ServeHTTP(httptest.NewRecorder(), first[0])
	reqs := requests(b.N, func(int) string { return "replay-1" })
	w := httptest.NewRecorder()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		w.Body.Reset()
		clear(w.Header())
		h.ServeHTTP(w, reqs[i])
		if i == 0 && w.Header().Get("Idempotent-Replayed") != "true" {
			b.Fatal("not a replay")
		}
	}
	b.StopTimer()
	reportOverhead(b, reqs)
}

// reportOverhead serves the same requests with the bare handler and
// reports the middleware's time and allocations over it.
func reportOverhead(b *testing.B, reqs []*http.Request) {
	own := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	resetBodies(reqs)
	w := httptest.NewRecorder()
	var ms0, ms1 runtimeMem
	ms0.read()
	start := time.Now()
	for _, r := range reqs {
		w.Body.Reset()
		clear(w.Header())
		apiHandler.ServeHTTP(w, r)
	}
	bare := float64(time.Since(start).Nanoseconds()) / float64(b.N)
	ms1.read()
	b.ReportMetric(own-bare, "overhead-ns/op")
	b.ReportMetric(bare, "bare-ns/op")
	b.ReportMetric(float64(ms1.mallocs-ms0.mallocs)/float64(b.N), "bare-allocs/op")
}
