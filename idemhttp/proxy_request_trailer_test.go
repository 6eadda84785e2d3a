package idemhttp_test

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// A chunked request's trailers reach the upstream after its body, for a
// protected request with a key, whose body the proxy holds (and forwards
// with a Content-Length of its own), as for one without: an upstream that
// reads a checksum or signature from a trailer gets it either way. An
// empty body's trailers too.
func TestProxyForwardsRequestTrailers(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "body=%s sig=%q", b, r.Trailer.Get("X-Sig"))
	}))
	t.Cleanup(up.Close)
	p := newProxy(t, up.URL, 5*time.Second)
	for _, tc := range []struct{ name, key, chunks, want string }{
		{"no key", "", "3\r\nabc\r\n", `body=abc sig="s1"`},
		{"key", "Idempotency-Key: trailer-1\r\n", "3\r\nabc\r\n", `body=abc sig="s1"`},
		{"key, empty body", "Idempotency-Key: trailer-2\r\n", "", `body= sig="s1"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t, p.URL)
			if _, err := io.WriteString(c, "POST /x HTTP/1.1\r\nHost: a\r\n"+tc.key+"Transfer-Encoding: chunked\r\nTrailer: X-Sig\r\nConnection: close\r\n\r\n"+
				tc.chunks+"0\r\nX-Sig: s1\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			res, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := bodyOf(t, res); res.StatusCode != http.StatusOK || got != tc.want {
				t.Fatalf("got %d %q, want 200 %q", res.StatusCode, got, tc.want)
			}
		})
	}
}
