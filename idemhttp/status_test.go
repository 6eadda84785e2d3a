package idemhttp_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/store/memstore"
)

// hijackable is a recorder whose connection can be taken over: one end of
// a pipe whose other end is closed.
type hijackable struct{ *httptest.ResponseRecorder }

func (hijackable) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, peer := net.Pipe()
	_ = peer.Close()
	return c, bufio.NewReadWriter(bufio.NewReader(c), bufio.NewWriter(c)), nil
}

// Event.Status is the status the client was sent: the one the handler
// wrote even when it panicked after; 500 for a panic before any; for a
// connection the handler took over, the status written before, or else 0.
// The same for a protected request and for one that passes through.
func TestEventStatusIsWhatTheClientGot(t *testing.T) {
	hijack := func(w http.ResponseWriter) {
		c, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(err)
		}
		_ = c.Close()
	}
	for _, c := range []struct {
		name    string
		handler func(w http.ResponseWriter)
		status  int
	}{
		{"returned without writing", func(w http.ResponseWriter) {}, 200},
		{"wrote 201", func(w http.ResponseWriter) { w.WriteHeader(http.StatusCreated) }, 201},
		{"panicked after writing 201", func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"half":`))
			panic("boom")
		}, 201},
		{"panicked after writing a body", func(w http.ResponseWriter) {
			_, _ = w.Write([]byte(`{"half":`))
			panic("boom")
		}, 200},
		{"panicked before writing", func(w http.ResponseWriter) { panic("boom") }, 500},
		{"hijacked", hijack, 0},
		{"hijacked then panicked", func(w http.ResponseWriter) { hijack(w); panic("boom") }, 0},
		{"wrote 202 then hijacked", func(w http.ResponseWriter) { w.WriteHeader(http.StatusAccepted); hijack(w) }, 202},
	} {
		for _, protected := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/protected=%v", c.name, protected), func(t *testing.T) {
				s, _ := memstore.New(memstore.Config{})
				events := make(chan idemhttp.Event, 1)
				h := idemhttp.Middleware(idemhttp.Config{Store: s, OnEvent: func(e idemhttp.Event) { events <- e }})(
					http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { c.handler(w) }))
				r := httptest.NewRequest("POST", "/x", strings.NewReader(`{}`))
				if protected {
					r.Header.Set("Idempotency-Key", "k1")
				}
				func() {
					defer func() { _ = recover() }()
					h.ServeHTTP(hijackable{httptest.NewRecorder()}, r)
				}()
				e := <-events
				if e.Status != c.status {
					t.Errorf("Event.Status = %d (outcome %s), want %d", e.Status, e.Outcome, c.status)
				}
			})
		}
	}
}

// A protocol upgrade through the proxy, for a protected request, is
// reported as the 101 the client got.
func TestProxyUpgradeEventStatus(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: tcp\r\nConnection: Upgrade\r\n\r\n")
		_ = brw.Flush()
	}))
	defer up.Close()
	events := make(chan idemhttp.Event, 1)
	p := serveProxy(t, up.URL, idemhttp.ProxyConfig{Middleware: idemhttp.Config{OnEvent: func(e idemhttp.Event) { events <- e }}})
	c, _ := upgradeThrough(t, p.URL, "POST /attach HTTP/1.1\r\nHost: x\r\nIdempotency-Key: up-1\r\nContent-Length: 0\r\nUpgrade: tcp\r\nConnection: Upgrade\r\n\r\n")
	_ = c.Close() // the exchange ends when both sides have closed
	select {
	case e := <-events:
		if e.Status != http.StatusSwitchingProtocols || e.Outcome != idemhttp.OutcomeReleased {
			t.Errorf("event: status %d, outcome %s; want 101, released", e.Status, e.Outcome)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no event for the upgraded request")
	}
}

// A handler that took its connection over holds its key until it returns:
// a retry meanwhile gets 409; after, it runs again (nothing is recorded).
func TestHijackedRequestHoldsItsKeyUntilItReturns(t *testing.T) {
	s, _ := memstore.New(memstore.Config{})
	hijacked, release := make(chan struct{}), make(chan struct{})
	runs := 0
	h := idemhttp.Middleware(idemhttp.Config{Store: s})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs++
		if runs > 1 {
			w.WriteHeader(http.StatusCreated)
			return
		}
		c, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		close(hijacked)
		<-release
	}))
	serve := func() int {
		r := httptest.NewRequest("POST", "/x", strings.NewReader(`{}`))
		r.Header.Set("Idempotency-Key", "hj")
		w := httptest.NewRecorder()
		h.ServeHTTP(hijackable{w}, r)
		return w.Code
	}
	done := make(chan struct{})
	go func() { defer close(done); serve() }()
	<-hijacked
	if code := serve(); code != http.StatusConflict {
		t.Errorf("retry while the hijacked handler runs: %d, want 409", code)
	}
	close(release)
	<-done
	if code := serve(); code != http.StatusCreated || runs != 2 {
		t.Errorf("retry after the hijacked handler returned: %d after %d runs, want 201 from a second run", code, runs)
	}
}

// A hijack that fails (HTTP/2, or a writer that cannot) takes nothing
// over: the handler's fallback response is recorded and replayed as any.
func TestFailedHijackStillRecords(t *testing.T) {
	s, _ := memstore.New(memstore.Config{})
	runs := 0
	h := idemhttp.Middleware(idemhttp.Config{Store: s})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs++
		if _, _, err := http.NewResponseController(w).Hijack(); err == nil {
			t.Error("Hijack succeeded on a writer that cannot hijack")
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"fallback":true}`))
	}))
	for i := range 2 {
		r := httptest.NewRequest("POST", "/x", strings.NewReader(`{}`))
		r.Header.Set("Idempotency-Key", "hj-fail")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusCreated || w.Body.String() != `{"fallback":true}` {
			t.Fatalf("request %d: %d %q", i+1, w.Code, w.Body)
		}
		if got, want := w.Header().Get(idemhttp.ReplayedHeader), map[int]string{0: "", 1: "true"}[i]; got != want {
			t.Errorf("request %d: %s = %q, want %q", i+1, idemhttp.ReplayedHeader, got, want)
		}
	}
	if runs != 1 {
		t.Errorf("handler ran %d times, want 1", runs)
	}
}

// A body the handler writes after a 204 or 304, which net/http refuses
// to send, is not recorded either: the record holds what the client got
// (as idem inspect shows it), and the replay is the same.
func TestBodyOfABodilessStatusIsNotRecorded(t *testing.T) {
	for _, status := range []int{http.StatusNoContent, http.StatusNotModified} {
		s, _ := memstore.New(memstore.Config{})
		h := idemhttp.Middleware(idemhttp.Config{Store: s})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(status)
			_, _ = io.WriteString(w, "never sent")
		}))
		srv := httptest.NewServer(h)
		for range 2 {
			req, _ := http.NewRequest("POST", srv.URL+"/x", strings.NewReader(`{}`))
			req.Header.Set("Idempotency-Key", "bodiless")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			_ = res.Body.Close()
			if res.StatusCode != status || len(b) != 0 {
				t.Errorf("%d: got %d %q", status, res.StatusCode, b)
			}
		}
		srv.Close()
		k, err := idem.ParseKey(idemhttp.DefaultNamespace, "bodiless")
		if err != nil {
			t.Fatal(err)
		}
		k, _ = k.WithScope(idemhttp.ScopeByAuthorization(httptest.NewRequest("POST", "/x", nil)))
		rec, err := s.Get(context.Background(), k)
		if err != nil {
			t.Fatal(err)
		}
		got, _, body, err := idemhttp.DecodeRecordedResponse(rec.Result)
		if err != nil || got != status || len(body) != 0 {
			t.Errorf("%d recorded as %d with body %q (%v), want no body", status, got, body, err)
		}
	}
}
