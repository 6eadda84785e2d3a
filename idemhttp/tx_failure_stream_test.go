package idemhttp_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
)

// countingWriter is a client's ResponseWriter that keeps the status and
// header it was sent and counts the body's bytes, without keeping them.
type countingWriter struct {
	header http.Header
	status int
	n      atomic.Int64
}

func (w *countingWriter) Header() http.Header { return w.header }

func (w *countingWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}

func (w *countingWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	w.n.Add(int64(len(p)))
	return len(p), nil
}

// A failure response (status 400 or more) that outgrows Config.MaxCapture
// cannot be recorded, so its transaction is rolled back whatever follows:
// it is passed on to the client as the handler writes it, not held whole
// until the handler returns. A handler writing a 64 MiB error does not make
// the middleware hold 64 MiB, and its client has the bytes before it
// returns.
func TestTxUnrecordableFailureIsPassedOnNotHeld(t *testing.T) {
	e := newFakeTxEnv(t)
	client := &countingWriter{header: http.Header{}}
	chunk := make([]byte, 1<<20)
	var seen int64 // what the client had when the handler was about to return
	var outcome idemhttp.Event
	h := e.handler(t, idemhttp.Config{MaxCapture: 1 << 20, OnEvent: func(ev idemhttp.Event) { outcome = ev }},
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			w.Header().Set("X-Reason", "upstream-dump")
			w.WriteHeader(http.StatusBadGateway)
			for range 64 {
				if _, err := w.Write(chunk); err != nil {
					t.Errorf("write: %v", err)
					return
				}
			}
			seen = client.n.Load()
		}))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	h.ServeHTTP(client, postReq("k-big-failure"))
	runtime.ReadMemStats(&after)

	if client.status != http.StatusBadGateway || client.header.Get("X-Reason") != "upstream-dump" || client.header.Get(idemhttp.ReplayedHeader) != "" {
		t.Errorf("client got %d %v; want the handler's 502 and its header", client.status, client.header)
	}
	if got := client.n.Load(); got != 64<<20 {
		t.Errorf("client got %d bytes, want %d", got, 64<<20)
	}
	if seen < 63<<20 {
		t.Errorf("client had %d bytes when the handler returned; want what it wrote, passed on as written", seen)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 16<<20 {
		t.Errorf("serving allocated %d MiB, want far less than the 64 MiB written", got>>20)
	}
	if f := e.last(t); f.commits.Load() != 0 || f.rollbacks.Load() != 1 {
		t.Errorf("%d commits, %d rollbacks; want rolled back once", f.commits.Load(), f.rollbacks.Load())
	}
	if outcome.Outcome != idemhttp.OutcomeReleased || outcome.Status != http.StatusBadGateway {
		t.Errorf("event %s %d, want %s %d", outcome.Outcome, outcome.Status, idemhttp.OutcomeReleased, http.StatusBadGateway)
	}
}

// A failure passed on before the handler returned (see above) still gets
// the trailers the handler sets after its body, over a real connection.
func TestTxUnrecordableFailurePassedOnKeepsTrailers(t *testing.T) {
	e := newFakeTxEnv(t)
	srv := httptest.NewServer(e.handler(t, idemhttp.Config{MaxCapture: 16}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Checksum")
		w.Header().Set("X-Reason", "dump")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, strings.Repeat("x", 100))
		w.Header().Set("X-Checksum", "abc")
		w.Header().Set(http.TrailerPrefix+"X-Late", "late")
	})))
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("b"))
	req.Header.Set(idem.HeaderName, "k-trailers")
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusInternalServerError || len(body) != 100 || res.Header.Get("X-Reason") != "dump" {
		t.Errorf("got %d, %d bytes, X-Reason %q; want 500, 100 bytes, dump", res.StatusCode, len(body), res.Header.Get("X-Reason"))
	}
	if res.Trailer.Get("X-Checksum") != "abc" || res.Trailer.Get("X-Late") != "late" {
		t.Errorf("trailers %v; want X-Checksum abc and X-Late late", res.Trailer)
	}
	if f := e.last(t); f.commits.Load() != 0 || f.rollbacks.Load() != 1 {
		t.Errorf("%d commits, %d rollbacks; want rolled back once", f.commits.Load(), f.rollbacks.Load())
	}
}

// A handler that panics after its failure was passed on (see above) has
// its transaction rolled back, and its event says the status its client
// was sent, not the 500 of a recovering middleware.
func TestTxPanicAfterFailurePassedOn(t *testing.T) {
	e := newFakeTxEnv(t)
	var ev idemhttp.Event
	h := e.handler(t, idemhttp.Config{MaxCapture: 16, OnEvent: func(e idemhttp.Event) { ev = e }}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
		_, _ = io.WriteString(w, strings.Repeat("x", 100))
		panic("after the body")
	}))
	client := &countingWriter{header: http.Header{}}
	if v := servePanic(h, client, postReq("k-panic-passed")); v == nil {
		t.Fatal("no panic")
	}
	if client.status != http.StatusBadGateway || client.n.Load() != 100 {
		t.Errorf("client got %d, %d bytes; want 502, 100 bytes", client.status, client.n.Load())
	}
	if ev.Status != http.StatusBadGateway {
		t.Errorf("event status %d, want 502", ev.Status)
	}
	if f := e.last(t); f.commits.Load() != 0 || f.rollbacks.Load() != 1 {
		t.Errorf("%d commits, %d rollbacks; want rolled back once", f.commits.Load(), f.rollbacks.Load())
	}
}

// In transaction mode too, a response of a declared Content-Length is
// delivered as net/http's HTTP/1.1 server sends it, unchunked and without
// its trailers, and so is its replay: the first answer and the replay
// agree.
func TestTxUnchunkedResponseHasNoTrailers(t *testing.T) {
	e := newFakeTxEnv(t)
	srv := httptest.NewServer(e.handler(t, idemhttp.Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Checksum")
		w.Header().Set("Content-Length", "5")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "hello")
		w.Header().Set("X-Checksum", "abc")
	})))
	defer srv.Close()
	for i, want := range []string{"", "true"} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("b"))
		req.Header.Set(idem.HeaderName, "k-unchunked")
		res, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode != http.StatusCreated || string(body) != "hello" || res.Header.Get(idemhttp.ReplayedHeader) != want {
			t.Fatalf("request %d: %d %q replayed=%q", i+1, res.StatusCode, body, res.Header.Get(idemhttp.ReplayedHeader))
		}
		if len(res.TransferEncoding) != 0 || res.ContentLength != 5 || res.Trailer.Get("X-Checksum") != "" {
			t.Errorf("request %d: Transfer-Encoding %v, Content-Length %d, trailers %v; want 5 bytes unchunked, no trailers", i+1, res.TransferEncoding, res.ContentLength, res.Trailer)
		}
	}
}
