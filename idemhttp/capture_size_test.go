package idemhttp_test

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/store/memstore"
)

// A body whose Content-Length the handler declared is kept in one buffer
// of that size, not in one grown write by write: of a 1 MiB body written
// in 32 KiB pieces, growing the kept copy costs some four times its size
// more (3.7 against 7.8 bytes allocated per body byte in all, with its
// record and the store's copy of that; more of both under the race
// detector).
func TestDeclaredBodyIsKeptInOneBuffer(t *testing.T) {
	const size = 1 << 20
	s, err := memstore.New(memstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	mw := idemhttp.Middleware(idemhttp.Config{Store: s, MaxCapture: 2 * size})
	piece := make([]byte, 32<<10)
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Has("declared") {
			w.Header().Set("Content-Length", strconv.Itoa(size))
		}
		for range size / len(piece) {
			_, _ = w.Write(piece)
		}
	}))
	serve := func(target, key string) float64 { return float64(bytesAllocated(h, target, key)) / size }
	serve("/orders?declared", "warm-up")
	serve("/orders", "warm-up")
	declared, grown := serve("/orders?declared", "declared"), serve("/orders", "grown")
	t.Logf("bytes allocated per body byte: %.2f with its length declared, %.2f without", declared, grown)
	if declared > grown-2 {
		t.Errorf("a declared body cost %.2f bytes per body byte, one written without its length %.2f: want at least 2 fewer", declared, grown)
	}
}

// A handler that declares a large body and writes little of it (slow to
// come, or cut short) does not have the whole declared length held for
// it: of a declared 8 MiB, 64 KiB written allocates a buffer of at most
// 1 MiB, not 8.
func TestDeclaredBodyIsNotReservedWhole(t *testing.T) {
	const declared, written = 8 << 20, 64 << 10
	s, err := memstore.New(memstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	mw := idemhttp.Middleware(idemhttp.Config{Store: s, MaxCapture: 2 * declared})
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(declared))
		_, _ = w.Write(make([]byte, written)) // and no more: cut short, not recorded
	}))
	bytesAllocated(h, "/orders", "warm-up")
	if n := bytesAllocated(h, "/orders", "short"); n > 3<<20 {
		t.Errorf("a response declaring %d bytes that wrote %d allocated %d bytes, want under 3 MiB", declared, written, n)
	}
}
