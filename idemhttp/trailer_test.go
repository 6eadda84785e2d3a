package idemhttp_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/store/memstore"
)

// A response with trailers, declared in the Trailer header or set under
// http.TrailerPrefix, is replayed with the same trailers the client got
// the first time (those that may be replayed: never Set-Cookie and the
// like), not without them.
func TestReplayHasTheTrailers(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Trailer", "X-Checksum")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "made")
		w.Header().Set("X-Checksum", "abc")
		w.Header().Set(http.TrailerPrefix+"X-Late", "late")
		w.Header().Set(http.TrailerPrefix+"Set-Cookie", "s=1")
	})
	s, _ := memstore.New(memstore.Config{})
	srv := httptest.NewServer(idemhttp.Middleware(idemhttp.Config{Store: s})(h))
	defer srv.Close()
	up := httptest.NewServer(h)
	defer up.Close()
	p := serveProxy(t, up.URL, idemhttp.ProxyConfig{Timeout: 5 * time.Second})
	for name, url := range map[string]string{"middleware": srv.URL, "proxy": p.URL} {
		for i, want := range []string{"", "true"} {
			res, body := post(t, url+"/x", "trailers", `{}`)
			if res.StatusCode != http.StatusCreated || body != "made" || res.Header.Get("Idempotent-Replayed") != want {
				t.Fatalf("%s, request %d: %d %q replayed=%q", name, i+1, res.StatusCode, body, res.Header.Get("Idempotent-Replayed"))
			}
			if got := res.Trailer.Get("X-Checksum") + " " + res.Trailer.Get("X-Late"); got != "abc late" {
				t.Errorf("%s, request %d: trailers %v, want X-Checksum: abc and X-Late: late", name, i+1, res.Trailer)
			}
			if want != "" && res.Trailer.Get("Set-Cookie") != "" {
				t.Errorf("%s, replay: trailers %v, with a Set-Cookie", name, res.Trailer)
			}
			if strings.HasPrefix(res.Header.Get("Trailer"), http.TrailerPrefix) {
				t.Errorf("%s, request %d: Trailer header %q", name, i+1, res.Header.Get("Trailer"))
			}
		}
	}
}
