package idemhttp_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/store/memstore"
)

// A handler that writes its declared Content-Length in full and then
// more: over HTTP/1.1 net/http refuses the write past the declared length
// whole (and every one after it), so the client has the whole declared
// body, cleanly. That response is recorded, as the client got it, and the
// retry is its replay rather than a second run. Over HTTP/2 the excess is
// sent and the client reports an error: not recorded, the retry runs
// again. A write that crosses the declared length before it is complete
// leaves the client a short body: not recorded either.
func TestWritePastTheDeclaredLength(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		for _, c := range []struct {
			name     string
			writes   []string
			recorded bool
		}{
			{"complete, then more", []string{"12345", "678"}, !h2},
			{"complete, then more in pieces", []string{"123", "45", "6", "78"}, !h2},
			{"crossing before complete", []string{"123", "4567"}, false},
			{"crossing, then what would fit", []string{"123", "4567", "45"}, false},
		} {
			var runs atomic.Int32
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				runs.Add(1)
				w.Header().Set("Content-Length", "5")
				w.WriteHeader(http.StatusCreated)
				for _, p := range c.writes {
					_, _ = io.WriteString(w, p)
				}
			})
			s, _ := memstore.New(memstore.Config{})
			srv := httptest.NewUnstartedServer(idemhttp.Middleware(idemhttp.Config{Store: s})(h))
			srv.EnableHTTP2 = h2
			srv.StartTLS()
			var first string
			for i := range 2 {
				req, _ := http.NewRequest(http.MethodPost, srv.URL+"/x", strings.NewReader(`{}`))
				req.Header.Set("Idempotency-Key", "overrun")
				res, err := srv.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, err := io.ReadAll(res.Body)
				_ = res.Body.Close()
				replayed := res.Header.Get(idemhttp.ReplayedHeader) == "true"
				switch {
				case i == 0 && c.recorded && (err != nil || string(body) != "12345"):
					t.Errorf("HTTP/2 %v, %s: the client got %q, %v; want the declared body whole", h2, c.name, body, err)
				case i == 0:
					first = string(body)
				case c.recorded && (!replayed || string(body) != first):
					t.Errorf("HTTP/2 %v, %s: retry got %q (replayed %v), want the replay of %q", h2, c.name, body, replayed, first)
				case !c.recorded && replayed:
					t.Errorf("HTTP/2 %v, %s: retry replayed %q, want it run again", h2, c.name, body)
				}
			}
			if want := map[bool]int32{true: 1, false: 2}[c.recorded]; runs.Load() != want {
				t.Errorf("HTTP/2 %v, %s: the handler ran %d times, want %d", h2, c.name, runs.Load(), want)
			}
			srv.Close()
		}
	}
}
