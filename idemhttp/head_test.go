package idemhttp_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/store/memstore"
)

// A protected HEAD whose handler declares the Content-Length of the body
// it does not send, as HEAD handlers do, is replayed with that length, as
// the client first got it, not without one.
func TestHEADReplayKeepsItsContentLength(t *testing.T) {
	s, _ := memstore.New(memstore.Config{})
	mw := idemhttp.Middleware(idemhttp.Config{Store: s, Methods: []string{http.MethodHead}})
	srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Length", "5")
	})))
	defer srv.Close()
	for i, want := range []string{"", "true"} {
		req, _ := http.NewRequest(http.MethodHead, srv.URL+"/doc", nil)
		req.Header.Set("Idempotency-Key", "head-1")
		res, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		if res.StatusCode != 200 || res.Header.Get("Idempotent-Replayed") != want || res.ContentLength != 5 {
			t.Errorf("request %d: %d replayed=%q Content-Length %d; want 200 and 5", i+1, res.StatusCode, res.Header.Get("Idempotent-Replayed"), res.ContentLength)
		}
	}
}
