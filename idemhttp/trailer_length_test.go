package idemhttp_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/store/memstore"
)

// A response whose handler declared its Content-Length is not chunked by
// net/http's HTTP/1.1 server, which then sends none of its trailers: the
// replay is what the client first got, the declared length and no
// trailers, not a chunked body ending with trailers never sent.
func TestReplayOfASizedResponseHasNoTrailers(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Checksum")
		w.Header().Set("Content-Length", "5")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "hello")
		w.Header().Set("X-Checksum", "abc")
		w.Header().Set(http.TrailerPrefix+"X-Late", "late")
	})
	s, _ := memstore.New(memstore.Config{})
	srv := httptest.NewServer(idemhttp.Middleware(idemhttp.Config{Store: s})(h))
	defer srv.Close()
	for i, want := range []string{"", "true"} {
		res, body := post(t, srv.URL+"/x", "sized-trailers", `{}`)
		if res.StatusCode != http.StatusCreated || body != "hello" || res.Header.Get("Idempotent-Replayed") != want {
			t.Fatalf("request %d: %d %q replayed=%q", i+1, res.StatusCode, body, res.Header.Get("Idempotent-Replayed"))
		}
		if res.ContentLength != 5 || len(res.TransferEncoding) != 0 {
			t.Errorf("request %d: Content-Length %d, Transfer-Encoding %v; want 5 and none", i+1, res.ContentLength, res.TransferEncoding)
		}
		if got := res.Trailer.Get("X-Checksum") + res.Trailer.Get("X-Late"); got != "" {
			t.Errorf("request %d: trailers %v, want none sent", i+1, res.Trailer)
		}
	}
}
