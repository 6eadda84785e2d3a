package idemhttp_test

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/store/memstore"
)

func newProxy(t *testing.T, upstream string, timeout time.Duration) *httptest.Server {
	t.Helper()
	return serveProxy(t, upstream, idemhttp.ProxyConfig{Middleware: idemhttp.Config{MaxBody: 2 << 20, MaxCapture: 2 << 20}, Timeout: timeout})
}

// serveProxy serves NewProxy(cfg) to upstream until the test ends, on a
// memstore unless cfg names a store, logging nowhere.
func serveProxy(t *testing.T, upstream string, cfg idemhttp.ProxyConfig) *httptest.Server {
	t.Helper()
	if cfg.Middleware.Store == nil {
		cfg.Middleware.Store, _ = memstore.New(memstore.Config{})
	}
	cfg.Upstream, _ = url.Parse(upstream)
	cfg.ErrorLog = log.New(io.Discard, "", 0)
	h, err := idemhttp.NewProxy(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := httptest.NewServer(h)
	t.Cleanup(p.Close)
	return p
}

func post(t *testing.T, url, key, body string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

func TestProxyReplaysLargeChunkedResponse(t *testing.T) {
	var runs atomic.Int32
	big := strings.Repeat("z", 1<<20)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Location", "/things/1")
		w.WriteHeader(201)
		// Written in pieces without a Content-Length: chunked.
		for i := 0; i < len(big); i += 64 << 10 {
			_, _ = io.WriteString(w, big[i:i+64<<10])
		}
		_, _ = w.Write(body[:10])
	}))
	defer up.Close()
	p := newProxy(t, up.URL, 5*time.Second)
	reqBody := strings.Repeat("b", 1<<20)
	res1, b1 := post(t, p.URL+"/things", "big-1", reqBody)
	res2, b2 := post(t, p.URL+"/things", "big-1", reqBody)
	if res1.StatusCode != 201 || res2.StatusCode != 201 || b1 != b2 || len(b1) != 1<<20+10 {
		t.Fatalf("statuses %d %d, bodies %d %d bytes, equal %v", res1.StatusCode, res2.StatusCode, len(b1), len(b2), b1 == b2)
	}
	if res2.Header.Get("Idempotent-Replayed") != "true" || res2.Header.Get("Location") != "/things/1" {
		t.Errorf("replay headers %v", res2.Header)
	}
	if runs.Load() != 1 {
		t.Errorf("upstream ran %d times, want 1", runs.Load())
	}
}

func TestProxyUpstreamDown(t *testing.T) {
	up := httptest.NewServer(http.NotFoundHandler())
	addr := up.URL
	up.Close() // nothing listens there any more
	p := newProxy(t, addr, time.Second)
	for range 2 {
		res, body := post(t, p.URL+"/x", "down-1", `{}`)
		if res.StatusCode != 502 || !strings.Contains(body, idemhttp.ProblemUpstream) || res.Header.Get("Content-Type") != "application/problem+json" {
			t.Fatalf("upstream down: %d %s", res.StatusCode, body)
		}
	}
}

func TestProxyUpstreamTimeout(t *testing.T) {
	var runs atomic.Int32
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if runs.Add(1) == 1 {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		w.WriteHeader(201)
	}))
	defer up.Close()
	defer close(release)
	p := newProxy(t, up.URL, 100*time.Millisecond)
	res, body := post(t, p.URL+"/x", "slow-1", `{}`)
	if res.StatusCode != 504 || !strings.Contains(body, idemhttp.ProblemUpstreamTimeout) {
		t.Fatalf("timeout: %d %s", res.StatusCode, body)
	}
	// Nothing was stored: the retry runs again.
	res, _ = post(t, p.URL+"/x", "slow-1", `{}`)
	if res.StatusCode != 201 || res.Header.Get("Idempotent-Replayed") != "" || runs.Load() != 2 {
		t.Fatalf("retry after timeout: %d replayed=%q runs=%d", res.StatusCode, res.Header.Get("Idempotent-Replayed"), runs.Load())
	}
}

func TestProxyEventStreamNotStored(t *testing.T) {
	var runs atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: hi\n\n")
	}))
	defer up.Close()
	p := newProxy(t, up.URL, time.Second)
	for range 2 {
		if res, body := post(t, p.URL+"/sse", "sse-1", `{}`); res.StatusCode != 200 || body != "data: hi\n\n" {
			t.Fatalf("%d %q", res.StatusCode, body)
		}
	}
	if runs.Load() != 2 {
		t.Errorf("runs %d, want 2", runs.Load())
	}
}

func TestNewProxyValidation(t *testing.T) {
	s, _ := memstore.New(memstore.Config{})
	for _, u := range []string{"", "ftp://x", "/relative"} {
		parsed, _ := url.Parse(u)
		if _, err := idemhttp.NewProxy(idemhttp.ProxyConfig{Upstream: parsed, Middleware: idemhttp.Config{Store: s}}); err == nil {
			t.Errorf("upstream %q accepted", u)
		}
	}
	// Credentials in the URL would not be sent (the transport ignores
	// them): refused, and not shown in the error.
	parsed, _ := url.Parse("https://svc:s3cret@api.example/v1")
	_, err := idemhttp.NewProxy(idemhttp.ProxyConfig{Upstream: parsed, Middleware: idemhttp.Config{Store: s}})
	if err == nil || !strings.Contains(err.Error(), "user") || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("upstream with credentials: %v; want an error about the user info that hides the password", err)
	}
	parsed, _ = url.Parse("ftp://svc:s3cret@api.example/")
	if _, err := idemhttp.NewProxy(idemhttp.ProxyConfig{Upstream: parsed, Middleware: idemhttp.Config{Store: s}}); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("bad upstream with credentials: %v; want an error that hides the password", err)
	}
	// The upstream's writes are in no transaction of the proxy's, and a
	// held response would stop streams and upgrades.
	parsed, _ = url.Parse("http://api.example/")
	_, err = idemhttp.NewProxy(idemhttp.ProxyConfig{Upstream: parsed, Middleware: idemhttp.Config{
		BeginTx: func(*http.Request) (*idemhttp.Tx, error) { return nil, errors.New("unused") }}})
	if err == nil || !strings.Contains(err.Error(), "BeginTx") {
		t.Errorf("a proxy with BeginTx: %v; want an error naming BeginTx", err)
	}
}

// staleHeartbeats is a store whose every heartbeat finds the key taken
// over.
type staleHeartbeats struct{ idem.Store }

func (staleHeartbeats) Heartbeat(context.Context, idem.Key, idem.Lease, time.Duration) (idem.Lease, error) {
	return idem.Lease{}, idem.ErrStaleToken
}

// A proxied request whose reservation is lost while the upstream runs it
// (the key taken over, or the store unreachable for the whole lease) is
// answered 503 saying so, with Retry-After: not 502 "could not be
// reached", since the upstream was reached and may have run it.
func TestProxyLeaseLostIsNotAnUnreachableUpstream(t *testing.T) {
	done := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done(): // the proxy gives up on the call
		case <-done:
		}
	}))
	defer up.Close()
	defer close(done)
	s, _ := memstore.New(memstore.Config{})
	p := serveProxy(t, up.URL, idemhttp.ProxyConfig{Middleware: idemhttp.Config{Store: staleHeartbeats{s}, Lease: 60 * time.Millisecond}, Timeout: 10 * time.Second})
	res, body := post(t, p.URL+"/charges", "lost", `{}`)
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" {
		t.Fatalf("status %d, Retry-After %q, want 503 with Retry-After: %s", res.StatusCode, res.Header.Get("Retry-After"), body)
	}
	if !strings.Contains(body, idemhttp.ProblemStoreUnavailable) || !strings.Contains(body, "may have run") {
		t.Errorf("problem %s, want the store-unavailable type saying the request may have run", body)
	}
}
