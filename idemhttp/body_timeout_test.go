package idemhttp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/store/memstore"
)

// timedServer is a real server of the middleware under cfg (its Store a
// memstore unless set) in front of a handler that reads the body and
// answers 201, counting its runs; over HTTP/2 (TLS) when h2.
type timedServer struct {
	srv    *httptest.Server
	runs   atomic.Int32
	events chan idemhttp.Event
	// clientCancelled is set when a request's own context (the client's)
	// was cancelled by the time the handler returned.
	clientCancelled atomic.Bool
	// deadlineLeft is set when a handler ran with a read deadline set
	// on its connection (seen through deadlineSpy).
	deadlineLeft atomic.Bool
	// hold, when positive, is how long the handler waits after reading
	// the body before it answers.
	hold time.Duration
}

// deadlineSpy is the client's writer, passing on the read deadlines set
// through it (http.ResponseController finds its SetReadDeadline) and
// remembering them.
type deadlineSpy struct {
	http.ResponseWriter
	mu  sync.Mutex
	set []time.Time
}

type spyKey struct{}

func (s *deadlineSpy) SetReadDeadline(d time.Time) error {
	s.mu.Lock()
	s.set = append(s.set, d)
	s.mu.Unlock()
	return http.NewResponseController(s.ResponseWriter).SetReadDeadline(d)
}

func (s *deadlineSpy) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// cleared reports whether a read deadline was set and the last one set
// was none.
func (s *deadlineSpy) cleared() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.set) > 1 && !s.set[0].IsZero() && s.set[len(s.set)-1].IsZero()
}

func newTimedServer(t *testing.T, cfg idemhttp.Config, h2 bool) *timedServer {
	t.Helper()
	ts := &timedServer{events: make(chan idemhttp.Event, 100)}
	if cfg.Store == nil {
		s, err := memstore.New(memstore.Config{})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Store = s
	}
	cfg.OnEvent = func(e idemhttp.Event) { ts.events <- e }
	mw, err := idemhttp.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	inner := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ts.runs.Add(1)
		if spy := r.Context().Value(spyKey{}).(*deadlineSpy); cfg.BodyTimeout > 0 && !spy.cleared() {
			ts.deadlineLeft.Store(true)
		}
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		time.Sleep(ts.hold)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"got":`+string(b)+`}`)
	}))
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		spy := &deadlineSpy{ResponseWriter: w}
		inner.ServeHTTP(spy, r.WithContext(context.WithValue(r.Context(), spyKey{}, spy)))
		if r.Context().Err() != nil {
			ts.clientCancelled.Store(true)
		}
	})
	if h2 {
		ts.srv = httptest.NewUnstartedServer(h)
		ts.srv.EnableHTTP2 = true
		ts.srv.StartTLS()
	} else {
		ts.srv = httptest.NewServer(h)
	}
	t.Cleanup(func() {
		ts.srv.Client().CloseIdleConnections()
		ts.srv.Close()
	})
	return ts
}

// post sends a complete keyed request with ts's own client.
func (ts *timedServer) post(t *testing.T, key, body string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", ts.srv.URL+"/pay", strings.NewReader(body))
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Content-Type", "application/json")
	res, err := ts.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, string(b)
}

// event is the next event of ts, within 10 s.
func (ts *timedServer) event(t *testing.T) idemhttp.Event {
	t.Helper()
	select {
	case e := <-ts.events:
		return e
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10 s")
		return idemhttp.Event{}
	}
}

// wantBodyTimeout checks that res, with body, is the 408 body-timeout
// problem naming limit.
func wantBodyTimeout(t *testing.T, res *http.Response, body string, limit time.Duration) {
	t.Helper()
	if res.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("status %d, body %q; want 408", res.StatusCode, body)
	}
	if ct, cc := res.Header.Get("Content-Type"), res.Header.Get("Cache-Control"); ct != "application/problem+json" || cc != "no-store" {
		t.Errorf("Content-Type %q, Cache-Control %q; want application/problem+json, no-store", ct, cc)
	}
	var p idemhttp.Problem
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatalf("problem body %q: %v", body, err)
	}
	want := "The request body was not received within " + limit.String() + "."
	if p.Type != idemhttp.ProblemBodyTimeout || p.Status != http.StatusRequestTimeout || p.Title == "" || p.Detail != want {
		t.Errorf("problem %+v; want type %s, status 408, detail %q", p, idemhttp.ProblemBodyTimeout, want)
	}
}

// A client that sends a keyed request's header and part of its body, then
// stalls, is answered 408 body-timeout once Config.BodyTimeout has passed,
// over HTTP/1.1 with a Content-Length or chunked: the handler does not
// run, no key is reserved (the complete request sent next with the same key
// runs), and the connection, whose unread rest of the body must not be
// read as a next request, is closed.
func TestStalledBodyIs408(t *testing.T) {
	const limit = 200 * time.Millisecond
	for name, head := range map[string]string{
		"content-length": "Content-Length: 20\r\n\r\n" + `{"amo`,
		"chunked":        "Transfer-Encoding: chunked\r\n\r\n14\r\n" + `{"amo`,
	} {
		t.Run(name, func(t *testing.T) {
			ts := newTimedServer(t, idemhttp.Config{BodyTimeout: limit}, false)
			c, err := net.Dial("tcp", ts.srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			key := "stall-" + name
			if _, err := io.WriteString(c, "POST /pay HTTP/1.1\r\nHost: api.example\r\nIdempotency-Key: "+key+"\r\nContent-Type: application/json\r\n"+head); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(c)
			res, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no response to a stalled body: %v", err)
			}
			b, _ := io.ReadAll(res.Body)
			_ = res.Body.Close()
			wantBodyTimeout(t, res, string(b), limit)
			if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
				t.Errorf("after the 408: read %v, want the connection closed (EOF)", err)
			}
			if e := ts.event(t); e.Outcome != idemhttp.OutcomeBodyTimeout || e.Status != http.StatusRequestTimeout {
				t.Errorf("event: outcome %s, status %d; want %s, 408", e.Outcome, e.Status, idemhttp.OutcomeBodyTimeout)
			}
			if n := ts.runs.Load(); n != 0 {
				t.Errorf("the handler ran %d times for a body never received", n)
			}
			res, body := ts.post(t, key, `{"amount":1234567}`)
			if res.StatusCode != http.StatusCreated || ts.runs.Load() != 1 {
				t.Errorf("the complete request with the key: %d %q, handler runs %d; want 201 and 1 run", res.StatusCode, body, ts.runs.Load())
			}
		})
	}
}

// Over HTTP/2, a keyed request whose body stalls is answered 408
// body-timeout on its stream, the handler not run and the key not
// reserved.
func TestStalledBodyIs408OverHTTP2(t *testing.T) {
	const limit = 200 * time.Millisecond
	ts := newTimedServer(t, idemhttp.Config{BodyTimeout: limit}, true)
	pr, pw := io.Pipe()
	defer pw.Close()
	req, _ := http.NewRequest("POST", ts.srv.URL+"/pay", pr)
	req.Header.Set("Idempotency-Key", "stall-h2")
	req.Header.Set("Content-Type", "application/json")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() { _, _ = io.WriteString(pw, `{"amo`) }() // and no more
	res, err := ts.srv.Client().Do(req.WithContext(ctx))
	if err != nil {
		t.Fatalf("no response to a stalled body: %v", err)
	}
	b, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if res.ProtoMajor != 2 {
		t.Fatalf("served over %s, want HTTP/2", res.Proto)
	}
	wantBodyTimeout(t, res, string(b), limit)
	_ = pw.CloseWithError(errors.New("the client gave up"))
	if e := ts.event(t); e.Outcome != idemhttp.OutcomeBodyTimeout || e.Status != http.StatusRequestTimeout {
		t.Errorf("event: outcome %s, status %d; want %s, 408", e.Outcome, e.Status, idemhttp.OutcomeBodyTimeout)
	}
	if n := ts.runs.Load(); n != 0 {
		t.Errorf("the handler ran %d times for a body never received", n)
	}
	res, body := ts.post(t, "stall-h2", `{"amount":1234567}`)
	if res.StatusCode != http.StatusCreated || ts.runs.Load() != 1 {
		t.Errorf("the complete request with the key: %d %q, handler runs %d; want 201 and 1 run", res.StatusCode, body, ts.runs.Load())
	}
}

// A body received within Config.BodyTimeout is served, and the read
// deadline is cleared once the body is read, before the handler runs: a
// handler taking longer than BodyTimeout answers, the client's context is
// not cancelled meanwhile, and a next request on the same keep-alive
// connection after an idle pause longer than BodyTimeout is served.
func TestBodyTimeoutIsClearedAfterTheBody(t *testing.T) {
	const limit = 150 * time.Millisecond
	t.Run("http1", func(t *testing.T) {
		ts := newTimedServer(t, idemhttp.Config{BodyTimeout: limit}, false)
		ts.hold = 3 * limit
		c, err := net.Dial("tcp", ts.srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		br := bufio.NewReader(c)
		for i, key := range []string{"in-time-1", "in-time-2"} {
			if i > 0 {
				time.Sleep(3 * limit) // idle on the keep-alive connection
			}
			body := `{"n":1}`
			if _, err := io.WriteString(c, "POST /pay HTTP/1.1\r\nHost: api.example\r\nIdempotency-Key: "+key+"\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n"+body); err != nil {
				t.Fatal(err)
			}
			res, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("request %d on the connection: %v", i+1, err)
			}
			b, _ := io.ReadAll(res.Body)
			_ = res.Body.Close()
			if res.StatusCode != http.StatusCreated || string(b) != `{"got":{"n":1}}` {
				t.Errorf("request %d on the connection: %d %q; want 201 and the handler's answer", i+1, res.StatusCode, b)
			}
		}
		if ts.clientCancelled.Load() || ts.deadlineLeft.Load() {
			t.Errorf("client's context cancelled %v, handler run under a read deadline %v; want neither", ts.clientCancelled.Load(), ts.deadlineLeft.Load())
		}
	})
	t.Run("http2", func(t *testing.T) {
		ts := newTimedServer(t, idemhttp.Config{BodyTimeout: limit}, true)
		ts.hold = 3 * limit
		reused := make([]bool, 2)
		for i, key := range []string{"in-time-1", "in-time-2"} {
			if i > 0 {
				time.Sleep(3 * limit)
			}
			req, _ := http.NewRequest("POST", ts.srv.URL+"/pay", strings.NewReader(`{"n":1}`))
			req.Header.Set("Idempotency-Key", key)
			req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
				GotConn: func(info httptrace.GotConnInfo) { reused[i] = info.Reused },
			}))
			res, err := ts.srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			_ = res.Body.Close()
			if res.StatusCode != http.StatusCreated || res.ProtoMajor != 2 || string(b) != `{"got":{"n":1}}` {
				t.Errorf("request %d: %s %d %q; want HTTP/2 201 and the handler's answer", i+1, res.Proto, res.StatusCode, b)
			}
		}
		if !reused[1] {
			t.Error("the second request was not sent on the first one's connection")
		}
		if ts.clientCancelled.Load() || ts.deadlineLeft.Load() {
			t.Errorf("client's context cancelled %v, handler run under a read deadline %v; want neither", ts.clientCancelled.Load(), ts.deadlineLeft.Load())
		}
	})
}

// With BodyTimeout 0, the default, a keyed body is read with no deadline:
// one that pauses mid-way is served whole.
func TestZeroBodyTimeoutHasNoDeadline(t *testing.T) {
	ts := newTimedServer(t, idemhttp.Config{}, false)
	c, err := net.Dial("tcp", ts.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "POST /pay HTTP/1.1\r\nHost: api.example\r\nIdempotency-Key: slow\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n"+`{"n"`); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if _, err := io.WriteString(c, `:1}`); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if res.StatusCode != http.StatusCreated || string(b) != `{"got":{"n":1}}` {
		t.Errorf("a paused body without BodyTimeout: %d %q; want 201 and the whole body", res.StatusCode, b)
	}
}

// A writer without deadlines (httptest.ResponseRecorder) has the body read
// without one, under a BodyTimeout all the same.
func TestBodyTimeoutWithoutDeadlineSupport(t *testing.T) {
	b := setup(t, idemhttp.Config{BodyTimeout: time.Millisecond})
	w := b.do(t, "POST", "/pay", `{"n":1}`, key("recorder"))
	if w.Code != http.StatusCreated || !strings.Contains(w.Body.String(), `{\"n\":1}`) {
		t.Errorf("BodyTimeout with a ResponseRecorder: %d %q; want 201 and the body echoed", w.Code, w.Body)
	}
	wantRuns(t, b, 1)
}

// A negative BodyTimeout is refused by New, naming the field.
func TestNegativeBodyTimeoutIsRefused(t *testing.T) {
	s, _ := memstore.New(memstore.Config{})
	if _, err := idemhttp.New(idemhttp.Config{Store: s, BodyTimeout: -time.Second}); err == nil || !strings.HasPrefix(err.Error(), "idemhttp: Config.BodyTimeout") {
		t.Errorf("New with BodyTimeout -1s = %v, want an error naming Config.BodyTimeout", err)
	}
}
