package idemhttp_test

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/store/memstore"
)

// ProxyConfig.Timeout bounds the upstream's answer: its response header,
// and the body of a response the proxy records. What streams through once
// the header has come (an unprotected response's body, an event stream, an
// upgraded connection) runs as long as it runs, as through a plain reverse
// proxy.

const proxyTimeout = 100 * time.Millisecond

// pause is how long the upstreams below wait mid-stream: several times the
// proxy's Timeout.
const pause = 5 * proxyTimeout

// streamingUpstream answers a first line at once and a second one after
// pause, with contentType.
func streamingUpstream(t *testing.T, contentType string) *httptest.Server {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		_, _ = io.WriteString(w, "one\n")
		_ = http.NewResponseController(w).Flush()
		time.Sleep(pause)
		_, _ = io.WriteString(w, "two\n")
	}))
	t.Cleanup(up.Close)
	return up
}

func TestProxyTimeoutDoesNotCutStreams(t *testing.T) {
	t.Parallel()
	for name, send := range map[string]func(url string) (*http.Request, string){
		"unprotected GET": func(url string) (*http.Request, string) {
			r, _ := http.NewRequest("GET", url+"/feed", nil)
			return r, "application/x-ndjson"
		},
		"protected POST, event stream": func(url string) (*http.Request, string) {
			r, _ := http.NewRequest("POST", url+"/events", strings.NewReader(`{}`))
			r.Header.Set("Idempotency-Key", "sse-1")
			return r, "text/event-stream"
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			req, contentType := send("")
			up := streamingUpstream(t, contentType)
			p := newProxy(t, up.URL, proxyTimeout)
			req.URL, _ = req.URL.Parse(p.URL + req.URL.Path)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			body, err := io.ReadAll(res.Body)
			if res.StatusCode != 200 || string(body) != "one\ntwo\n" || err != nil {
				t.Fatalf("%d %q %v; want 200 and both lines, the second sent after the proxy's Timeout", res.StatusCode, body, err)
			}
		})
	}
}

func TestProxyTimeoutDoesNotCutUpgradedConnections(t *testing.T) {
	t.Parallel()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		_ = brw.Flush()
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		line, _ := brw.ReadString('\n')
		_, _ = brw.WriteString("echo " + line)
		_ = brw.Flush()
	}))
	defer up.Close()
	p := newProxy(t, up.URL, proxyTimeout)
	c, br := upgradeThrough(t, p.URL, "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
	time.Sleep(pause) // the connection outlives the Timeout
	fmt.Fprintf(c, "hello\n")
	if line, err := br.ReadString('\n'); line != "echo hello\n" {
		t.Fatalf("after the proxy's Timeout the upgraded connection answered %q, %v; want the echo", line, err)
	}
}

// The Timeout still bounds the wait for the response header, protected or
// not, and the body of a response being recorded: 504, nothing recorded.
func TestProxyTimeoutBoundsTheAnswer(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		if r.URL.Path == "/body" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"half":`)
			_ = http.NewResponseController(w).Flush()
		}
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}))
	defer up.Close()
	p := newProxy(t, up.URL, proxyTimeout)
	for _, c := range []struct{ method, path, key string }{
		{"GET", "/header", ""},
		{"POST", "/header", "header-1"},
		{"POST", "/body", "body-1"},
	} {
		req, _ := http.NewRequest(c.method, p.URL+c.path, nil)
		if c.key != "" {
			req.Header.Set("Idempotency-Key", c.key)
		}
		start := time.Now()
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusGatewayTimeout || !strings.Contains(string(body), idemhttp.ProblemUpstreamTimeout) {
			t.Errorf("%s %s: %d %s after %v; want 504", c.method, c.path, res.StatusCode, body, time.Since(start))
		}
	}
	// Nothing was recorded: the retry runs again.
	before := runs.Load()
	req, _ := http.NewRequest("POST", p.URL+"/body", nil)
	req.Header.Set("Idempotency-Key", "body-1")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusGatewayTimeout || runs.Load() != before+1 {
		t.Errorf("retry: %d, runs %d → %d; want the upstream called again", res.StatusCode, before, runs.Load())
	}
}

// A protected request's body is read before the upstream is called, so the
// proxy does not pass the client's Expect: 100-continue on: the upstream
// would have the proxy wait for a 100 Continue before sending what it
// already holds.
func TestProxyDoesNotForwardExpectForABodyItHolds(t *testing.T) {
	t.Parallel()
	var expect atomic.Value
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		expect.Store(r.Header.Get("Expect"))
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusCreated)
	}))
	defer up.Close()
	for name, p := range map[string]*httptest.Server{
		"recorded": newProxy(t, up.URL, 5*time.Second),
		// The store is down: the request goes through unrecorded, but with
		// the body the middleware has read.
		"fail-open": serveProxy(t, up.URL, idemhttp.ProxyConfig{Middleware: idemhttp.Config{Store: failingStore{}, FailOpen: true}}),
	} {
		expect.Store("(no request)")
		req, _ := http.NewRequest("POST", p.URL+"/x", strings.NewReader(`{"a":1}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "expect-1")
		req.Header.Set("Expect", "100-continue")
		tr := &http.Transport{ExpectContinueTimeout: 5 * time.Second}
		res, err := (&http.Client{Transport: tr}).Do(req)
		tr.CloseIdleConnections()
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusCreated {
			t.Fatalf("%s: status %d", name, res.StatusCode)
		}
		if got := expect.Load(); got != "" {
			t.Errorf("%s: the upstream got Expect: %q; want none", name, got)
		}
	}
}

// The log line of an upstream that does not answer in time says so once,
// with the timeout, whether it stalls before its header or in a recorded
// body.
func TestProxyTimeoutLogSaysItOnce(t *testing.T) {
	t.Parallel()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/body" {
			_, _ = io.WriteString(w, `{"half":`)
			_ = http.NewResponseController(w).Flush()
		}
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}))
	defer up.Close()
	var logged syncLog
	s, _ := memstore.New(memstore.Config{})
	u, _ := url.Parse(up.URL)
	h, err := idemhttp.NewProxy(idemhttp.ProxyConfig{Upstream: u, Timeout: proxyTimeout, Middleware: idemhttp.Config{Store: s}, ErrorLog: log.New(&logged, "", 0)})
	if err != nil {
		t.Fatal(err)
	}
	p := httptest.NewServer(h)
	defer p.Close()
	for _, path := range []string{"/header", "/body"} {
		req, _ := http.NewRequest("POST", p.URL+path, nil)
		req.Header.Set("Idempotency-Key", "log"+path)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		_ = res.Body.Close()
	}
	for _, line := range strings.Split(strings.TrimSpace(logged.String()), "\n") {
		if n := strings.Count(line, "did not answer"); n != 1 {
			t.Errorf("log line %q says the upstream did not answer %d times, want once", line, n)
		}
		if want := "did not answer within " + proxyTimeout.String(); !strings.Contains(line, want) {
			t.Errorf("log line %q does not say %q", line, want)
		}
	}
	if n := strings.Count(logged.String(), "\n"); n != 2 {
		t.Errorf("%d log lines, want 2:\n%s", n, logged.String())
	}
}

// syncLog is a log's output that tests read while the proxy may write.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
