package idemhttp_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/store/memstore"
)

// The headers recorded are those the client got, as they were when the
// status was written: a value the handler changes in place afterwards
// (which net/http does not send) changes neither the response nor its
// replay. So for the Content-Length a HEAD declares.
func TestHeaderChangedInPlaceAfterWriteHeaderIsNotRecorded(t *testing.T) {
	for _, method := range []string{http.MethodPost, http.MethodHead} {
		s, _ := memstore.New(memstore.Config{})
		mw := idemhttp.Middleware(idemhttp.Config{Store: s, Methods: []string{method}})
		srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h := w.Header()
			h.Set("Content-Type", "application/json")
			h["Link"] = []string{"</a>; rel=a", "</b>; rel=b"}
			h.Set("Location", "/things/1")
			h.Set("X-Request-Id", "req-1")
			h.Set("Etag", `"v1"`)
			if r.Method == http.MethodHead {
				h.Set("Content-Length", "2")
			}
			w.WriteHeader(http.StatusCreated)
			h["Content-Type"][0] = "text/plain"
			h["Link"][1] = "</c>; rel=c"
			h["Etag"][0] = `"v2"`
			if r.Method == http.MethodHead {
				h["Content-Length"][0] = "9"
			} else {
				_, _ = w.Write([]byte("{}"))
			}
		})))
		var got [2]http.Header
		var lengths [2]int64
		for i := range got {
			req, _ := http.NewRequest(method, srv.URL, nil)
			req.Header.Set("Idempotency-Key", "in-place-1")
			res, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = res.Body.Close()
			got[i], lengths[i] = res.Header, res.ContentLength
		}
		srv.Close()
		if got[1].Get("Idempotent-Replayed") != "true" {
			t.Fatalf("%s: not replayed", method)
		}
		for _, name := range []string{"Content-Type", "Link", "Etag", "Location", "X-Request-Id"} {
			if a, b := got[0][name], got[1][name]; len(a) == 0 || !slices.Equal(a, b) {
				t.Errorf("%s %s: first %q, replay %q", method, name, a, b)
			}
		}
		if lengths[0] != 2 || lengths[1] != 2 {
			t.Errorf("%s: Content-Length first %d, replay %d; want 2", method, lengths[0], lengths[1])
		}
	}
}
