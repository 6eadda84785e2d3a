package idemhttp_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/store/memstore"
)

// A protected HEAD sends no body, whatever the Content-Length it declares:
// one declaring a length over MaxCapture is recorded (its header is the
// whole response) and replayed with that length. One whose handler also
// writes the body, as GET handlers serving HEAD too do (net/http discards
// it), is recorded up to MaxCapture alike, the replay getting the same
// length; beyond MaxCapture it is not recorded, and its retry runs again.
func TestHEADOverMaxCapture(t *testing.T) {
	const maxCapture, declared = 16, 100
	for _, tc := range []struct {
		name     string
		write    int
		recorded bool
	}{
		{"declared only", 0, true},
		{"body within MaxCapture", maxCapture, true},
		{"body beyond MaxCapture", declared, false},
	} {
		var runs atomic.Int32
		s, _ := memstore.New(memstore.Config{})
		mw := idemhttp.Middleware(idemhttp.Config{Store: s, Methods: []string{http.MethodHead}, MaxCapture: maxCapture})
		srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			runs.Add(1)
			w.Header().Set("Content-Length", strconv.Itoa(declared))
			_, _ = w.Write(make([]byte, tc.write))
		})))
		for i := range 2 {
			req, _ := http.NewRequest(http.MethodHead, srv.URL, nil)
			req.Header.Set("Idempotency-Key", "head-big")
			res, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = res.Body.Close()
			if res.StatusCode != 200 || res.ContentLength != declared {
				t.Errorf("%s, request %d: %d, Content-Length %d; want 200 and %d", tc.name, i+1, res.StatusCode, res.ContentLength, declared)
			}
			if replayed := res.Header.Get("Idempotent-Replayed") == "true"; i == 1 && replayed != tc.recorded {
				t.Errorf("%s: retry replayed %v, want %v", tc.name, replayed, tc.recorded)
			}
		}
		srv.Close()
		if want := map[bool]int32{true: 1, false: 2}[tc.recorded]; runs.Load() != want {
			t.Errorf("%s: the handler ran %d times, want %d", tc.name, runs.Load(), want)
		}
	}
}
