package idemhttp_test

import (
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/idemgo/idem/idemhttp"
)

// discardingClient is a client's ResponseWriter that keeps nothing, so
// that what a request allocates is the middleware's and the store's.
type discardingClient struct{ h http.Header }

func (c *discardingClient) Header() http.Header         { return c.h }
func (c *discardingClient) Write(p []byte) (int, error) { return len(p), nil }
func (c *discardingClient) WriteHeader(int)             {}

// bytesAllocated serves a keyed POST to target through h, to a client
// that keeps nothing, and returns the bytes allocated meanwhile.
func bytesAllocated(h http.Handler, target, key string) uint64 {
	r, _ := http.NewRequest(http.MethodPost, target, strings.NewReader("mug"))
	r.Header.Set("Idempotency-Key", key)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	h.ServeHTTP(&discardingClient{h: http.Header{}}, r)
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// Transaction mode holds a response's body once, in what it records, not
// a second time for the client: a 1 MiB body written in 32 KiB pieces
// costs in all (its growing copy, its record, the store's copy of it)
// well under the twice-grown copies it cost.
func TestTxHoldsTheBodyOnce(t *testing.T) {
	const size = 1 << 20
	_, beginTx := sqliteTx(t)
	mw := idemhttp.Middleware(idemhttp.Config{BeginTx: beginTx, MaxCapture: 2 * size})
	piece := make([]byte, 32<<10)
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for range size / len(piece) {
			_, _ = w.Write(piece)
		}
	}))
	bytesAllocated(h, "/orders", "warm-up")
	if n := bytesAllocated(h, "/orders", "once"); n > 10*size {
		t.Errorf("a request with a %d-byte body allocated %d bytes (%.1f per body byte), want under 10", size, n, float64(n)/size)
	}
}
