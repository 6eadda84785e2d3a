package idemhttp_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/store/memstore"
)

// A response that net/http sent without sniffing its Content-Type (the
// handler set Content-Type to nil to prevent it, or, over HTTP/1, set a
// Transfer-Encoding) is replayed without one too, not with the type
// net/http sniffs from the replayed body; one it sniffed (over HTTP/2,
// which ignores a Transfer-Encoding) is replayed sniffed.
func TestReplayIsNotSniffedWhenTheFirstAnswerWasNot(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		for name, set := range map[string]func(http.Header){
			"Content-Type nil":           func(h http.Header) { h["Content-Type"] = nil },
			"Transfer-Encoding: chunked": func(h http.Header) { h.Set("Transfer-Encoding", "chunked") },
		} {
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				set(w.Header())
				w.WriteHeader(http.StatusCreated)
				_, _ = io.WriteString(w, "<html>made")
			})
			s, _ := memstore.New(memstore.Config{})
			srv := httptest.NewUnstartedServer(idemhttp.Middleware(idemhttp.Config{Store: s})(h))
			srv.EnableHTTP2 = h2
			srv.StartTLS()
			sniffed := h2 && name != "Content-Type nil"
			for i, want := range []string{"", "true"} {
				req, _ := http.NewRequest(http.MethodPost, srv.URL+"/x", strings.NewReader(`{}`))
				req.Header.Set("Idempotency-Key", "unsniffed")
				res, err := srv.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(res.Body)
				_ = res.Body.Close()
				if res.StatusCode != http.StatusCreated || string(body) != "<html>made" || res.Header.Get("Idempotent-Replayed") != want {
					t.Fatalf("%s, %s, request %d: %d %q replayed=%q", res.Proto, name, i+1, res.StatusCode, body, res.Header.Get("Idempotent-Replayed"))
				}
				if v, ok := res.Header["Content-Type"]; ok != sniffed {
					t.Errorf("%s, %s, request %d: Content-Type %q, want it sniffed: %v", res.Proto, name, i+1, v, sniffed)
				}
			}
			srv.Close()
		}
	}
}
