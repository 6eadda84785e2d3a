package idemhttp_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/store/memstore"
)

// A response that net/http sent without sniffing its Content-Type (the
// handler set Content-Type to nil to prevent it, or set a
// Transfer-Encoding) is replayed without one too, not with the type
// net/http sniffs from the replayed body.
func TestReplayIsNotSniffedWhenTheFirstAnswerWasNot(t *testing.T) {
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
		srv := httptest.NewServer(idemhttp.Middleware(idemhttp.Config{Store: s})(h))
		for i, want := range []string{"", "true"} {
			res, body := post(t, srv.URL+"/x", "unsniffed", `{}`)
			if res.StatusCode != http.StatusCreated || body != "<html>made" || res.Header.Get("Idempotent-Replayed") != want {
				t.Fatalf("%s, request %d: %d %q replayed=%q", name, i+1, res.StatusCode, body, res.Header.Get("Idempotent-Replayed"))
			}
			if v, ok := res.Header["Content-Type"]; ok {
				t.Errorf("%s, request %d: Content-Type %q, want none", name, i+1, v)
			}
		}
		srv.Close()
	}
}
