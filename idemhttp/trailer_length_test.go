package idemhttp_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/store/memstore"
)

// A response whose handler declared its Content-Length, or a
// Transfer-Encoding of identity, is not chunked by net/http's HTTP/1.1
// server, which then sends none of its trailers: the replay has no
// trailers either, and is not chunked, rather than a chunked body ending
// with trailers the client never got.
func TestReplayOfAnUnchunkedResponseHasNoTrailers(t *testing.T) {
	for name, framing := range map[string][2]string{
		"Content-Length":              {"Content-Length", "5"},
		"Transfer-Encoding: identity": {"Transfer-Encoding", "identity"},
	} {
		h := helloWithTrailers(func(h http.Header) { h.Set(framing[0], framing[1]) })
		s, _ := memstore.New(memstore.Config{})
		srv := httptest.NewServer(idemhttp.Middleware(idemhttp.Config{Store: s})(h))
		for i, want := range []string{"", "true"} {
			res, body := post(t, srv.URL+"/x", "unchunked-trailers", `{}`)
			if res.StatusCode != http.StatusCreated || body != "hello" || res.Header.Get("Idempotent-Replayed") != want {
				t.Fatalf("%s, request %d: %d %q replayed=%q", name, i+1, res.StatusCode, body, res.Header.Get("Idempotent-Replayed"))
			}
			if len(res.TransferEncoding) != 0 {
				t.Errorf("%s, request %d: Transfer-Encoding %v, want none", name, i+1, res.TransferEncoding)
			}
			if got := res.Trailer.Get("X-Checksum") + res.Trailer.Get("X-Late"); got != "" {
				t.Errorf("%s, request %d: trailers %v, want none sent", name, i+1, res.Trailer)
			}
		}
		srv.Close()
	}
}

// helloWithTrailers answers 201 "hello" with two trailers, X-Checksum
// declared in the Trailer header and X-Late set under http.TrailerPrefix,
// after frame sets the header's framing, if it is not nil.
func helloWithTrailers(frame func(http.Header)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Checksum")
		if frame != nil {
			frame(w.Header())
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "hello")
		w.Header().Set("X-Checksum", "abc")
		w.Header().Set(http.TrailerPrefix+"X-Late", "late")
	})
}
