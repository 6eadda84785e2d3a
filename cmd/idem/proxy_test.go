package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/idemgo/idem/internal/syncbuf"
)

// errAcceptBroken is the Accept error of a failingListener that failed.
var errAcceptBroken = errors.New("accept: injected failure")

// failingListener is a listener whose Accept fails, for good, once fail
// is called: http.Server.Serve then returns.
type failingListener struct {
	net.Listener
	failed atomic.Bool
}

func (l *failingListener) fail() {
	l.failed.Store(true)
	_ = l.Listener.Close() // Accept returns
}

func (l *failingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if l.failed.Load() {
		if c != nil {
			_ = c.Close()
		}
		return nil, errAcceptBroken
	}
	return c, err
}

// inProcessProxy is runProxy running in this process.
type inProcessProxy struct {
	addr   string
	stderr *syncbuf.Buffer
	done   chan error // runProxy's result
}

// runProxyInProcess runs runProxy with args (--listen 127.0.0.1:0 added)
// until ctx ends, serving on what wrap makes of the listener of each flag
// failingOne is a wrap for runProxyInProcess that makes the listener of
// the flag name a failingListener, sent on lns, and leaves the others.
func failingOne(name string, lns chan<- *failingListener) func(string, net.Listener) net.Listener {
	return func(flag string, ln net.Listener) net.Listener {
		if flag != name {
			return ln
		}
		fl := &failingListener{Listener: ln}
		lns <- fl
		return fl
	}
}

// (--listen, --admin), and waits until it listens.
func runProxyInProcess(t *testing.T, ctx context.Context, wrap func(name string, ln net.Listener) net.Listener, args ...string) *inProcessProxy {
	t.Helper()
	old := serveListener
	serveListener = wrap
	t.Cleanup(func() { serveListener = old })
	stdout := &syncbuf.Buffer{}
	p := &inProcessProxy{stderr: &syncbuf.Buffer{}, done: make(chan error, 1)}
	go func() {
		p.done <- runProxy(ctx, append([]string{"--listen", "127.0.0.1:0"}, args...), stdout, p.stderr, noEnv)
	}()
	listening := regexp.MustCompile(`listening on http://(\S+),`)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if m := listening.FindStringSubmatch(stdout.String()); m != nil {
			p.addr = m[1]
			return p
		}
		select {
		case err := <-p.done:
			t.Fatalf("runProxy returned before listening: %v\n%s", err, p.stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("runProxy not listening after 30 s\n%s", p.stderr)
		}
	}
}

// keyStatus is the status idem inspect shows for key in store dsn, or
// "none" when the key has no live record.
func keyStatus(t *testing.T, dsn, key string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	err := runInspect(context.Background(), []string{"--store", dsn, "--key", key}, &out, &errOut, noEnv)
	switch {
	case err != nil && strings.Contains(err.Error(), "no live record"):
		return "none"
	case err != nil:
		t.Fatalf("idem inspect --key %s: %v\n%s", key, err, errOut.String())
	}
	var rec struct{ Status string }
	if err := json.Unmarshal(out.Bytes(), &rec); err != nil {
		t.Fatalf("idem inspect --key %s: %v in %q", key, err, out.String())
	}
	return rec.Status
}

// TestServeFailureSettlesInFlightKeys: when the proxy's listener fails
// (Serve returns an error, not at a shutdown), the proxy stops as it does
// on SIGTERM: it waits, up to --shutdown-timeout, for the requests being
// served, upgraded connections included, closes those still open then,
// and lets their handlers settle their keys before it closes the store;
// it then returns an error naming the listener's failure. No key is left
// reserved until its lease ends.
func TestServeFailureSettlesInFlightKeys(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	releaseUpstream := func() { once.Do(func() { close(release) }) }
	t.Cleanup(releaseUpstream)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") == "" {
			<-release
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, "done")
			return
		}
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
		if brw.Flush() == nil {
			_, _ = io.Copy(c, brw)
		}
	}))
	t.Cleanup(upstream.Close)

	dsn := "sqlite:" + filepath.Join(t.TempDir(), "idem.db")
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	lns := make(chan *failingListener, 1)
	p := runProxyInProcess(t, ctx, failingOne("--listen", lns), "--upstream", upstream.URL, "--store", dsn, "--shutdown-timeout", "2s", "--purge-interval", "0")
	fl := <-lns

	// An ordinary request, its upstream answering only when released.
	slow := make(chan *http.Response, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, "http://"+p.addr+"/charges", strings.NewReader("{}"))
		req.Header.Set("Idempotency-Key", "slow")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Errorf("the in-flight request: %v", err)
			close(slow)
			return
		}
		_, _ = io.ReadAll(res.Body)
		res.Body.Close()
		slow <- res
	}()
	// An upgraded connection, held open by its client.
	c, err := net.Dial("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(c, "POST /attach HTTP/1.1\r\nHost: x\r\nIdempotency-Key: up\r\nContent-Length: 0\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
	br := bufio.NewReader(c)
	if res, err := http.ReadResponse(br, nil); err != nil || res.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade through the proxy: %v, %v; want 101", res, err)
	}
	for deadline := time.Now().Add(30 * time.Second); keyStatus(t, dsn, "slow") != "in_progress"; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the slow request's key is not in progress after 30 s")
		}
	}

	fl.fail()
	// The upstream answers once the proxy has stopped accepting: while it
	// waits for the request, or after it returned without waiting.
	var runErr error
	returned := false
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(p.stderr.String(), "in-flight"); time.Sleep(5 * time.Millisecond) {
		select {
		case runErr = <-p.done:
			returned = true
		default:
		}
		if returned || time.Now().After(deadline) {
			break
		}
	}
	releaseUpstream()
	if res, ok := <-slow; ok && res.StatusCode != http.StatusCreated {
		t.Errorf("the in-flight request: %d, want the upstream's 201", res.StatusCode)
	}
	// The upgraded connection is closed by the proxy at the end of the
	// grace period.
	if n, err := br.Read(make([]byte, 1)); err == nil {
		t.Errorf("read %d bytes from the upgraded connection; want it closed by the proxy", n)
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Errorf("the upgraded connection was not closed by the proxy: %v", err)
	}
	if !returned {
		select {
		case runErr = <-p.done:
		case <-time.After(30 * time.Second):
			t.Fatalf("runProxy still running 30 s after its listener failed\n%s", p.stderr)
		}
	}
	if runErr == nil || !errors.Is(runErr, errAcceptBroken) {
		t.Errorf("runProxy = %v; want an error wrapping the listener's %q", runErr, errAcceptBroken)
	}
	if want := "closed 1 upgraded connection still open after --shutdown-timeout 2s"; !strings.Contains(p.stderr.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, p.stderr)
	}
	if s := keyStatus(t, dsn, "slow"); s != "committed" {
		t.Errorf("key of the request in flight when the listener failed: %s; want committed", s)
	}
	if s := keyStatus(t, dsn, "up"); s != "none" {
		t.Errorf("key of the upgraded connection open when the listener failed: %s; want released", s)
	}
	if t.Failed() {
		t.Logf("stderr:\n%s", p.stderr)
	}
}

// TestAdminListenerFailureIsLogged: when the --admin listener fails, the
// proxy says so, naming --admin and the failure (an orchestrator probing
// /healthz would otherwise restart it with no word of why), and goes on
// forwarding requests; a signal then stops it as usual.
func TestAdminListenerFailureIsLogged(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(upstream.Close)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	lns := make(chan *failingListener, 1)
	p := runProxyInProcess(t, ctx, failingOne("--admin", lns), "--upstream", upstream.URL, "--store", "memory", "--admin", "127.0.0.1:0", "--purge-interval", "0")
	var fl *failingListener
	select {
	case fl = <-lns:
	case <-time.After(30 * time.Second):
		t.Fatal("the --admin listener was not served")
	}
	fl.fail()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(p.stderr.String(), "--admin"); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("nothing logged 10 s after the --admin listener failed:\n%s", p.stderr)
		}
	}
	if msg := p.stderr.String(); !strings.Contains(msg, errAcceptBroken.Error()) {
		t.Errorf("log %q does not name the failure %q", msg, errAcceptBroken)
	}
	res, err := http.Post("http://"+p.addr+"/charges", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatalf("a request after the --admin listener failed: %v", err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || string(b) != "ok" {
		t.Errorf("a request after the --admin listener failed: %d %q, want the upstream's 200 ok", res.StatusCode, b)
	}
	cancel()
	select {
	case err := <-p.done:
		if err != nil {
			t.Errorf("runProxy after a signal = %v, want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("runProxy still running 30 s after the signal")
	}
}

// An idle keep-alive connection to idem proxy is closed after
// clientIdleTimeout, rather than held open for as long as the client
// keeps it, each one a file descriptor and a goroutine of the proxy.
func TestIdleClientConnectionsAreClosed(t *testing.T) {
	old := clientIdleTimeout
	clientIdleTimeout = 200 * time.Millisecond
	t.Cleanup(func() { clientIdleTimeout = old })
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(upstream.Close)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	p := runProxyInProcess(t, ctx, func(_ string, ln net.Listener) net.Listener { return ln },
		"--upstream", upstream.URL, "--store", "memory", "--purge-interval", "0")
	c, err := net.Dial("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "GET /x HTTP/1.1\r\nHost: api.example\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.ReadAll(res.Body)
	_ = res.Body.Close()
	start := time.Now()
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("idle connection: read %v after %s, want the proxy to close it (EOF)", err, time.Since(start))
	}
}

// A client that sends a request header slowly, never ending it, has its
// connection closed after clientHeaderTimeout, and one sending a header
// over 1 MiB gets 431: neither reaches the upstream.
func TestSlowOrHugeRequestHeadersAreCut(t *testing.T) {
	old := clientHeaderTimeout
	clientHeaderTimeout = 300 * time.Millisecond
	t.Cleanup(func() { clientHeaderTimeout = old })
	var reached atomic.Int32
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
	}))
	t.Cleanup(upstream.Close)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	p := runProxyInProcess(t, ctx, func(_ string, ln net.Listener) net.Listener { return ln },
		"--upstream", upstream.URL, "--store", "memory", "--purge-interval", "0")
	dial := func() net.Conn {
		c, err := net.Dial("tcp", p.addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		return c
	}

	slow := dial()
	if _, err := io.WriteString(slow, "POST /x HTTP/1.1\r\nHost: api.example\r\nX-Slow: "); err != nil {
		t.Fatal(err)
	}
	// Drip the header a byte at a time until the proxy stops reading.
	closed := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, slow)
		closed <- err
	}()
	drip := time.NewTicker(50 * time.Millisecond)
	defer drip.Stop()
dripping:
	for {
		select {
		case err := <-closed:
			// A drip crossing the close may have the connection reset.
			if err != nil && !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("slow header: %v, want the proxy to close the connection", err)
			}
			break dripping
		case <-drip.C:
			_, _ = io.WriteString(slow, "a")
		}
	}

	huge := dial()
	go func() {
		_, _ = io.WriteString(huge, "POST /x HTTP/1.1\r\nHost: api.example\r\nX-Huge: "+strings.Repeat("a", 2<<20)+"\r\nContent-Length: 0\r\n\r\n")
	}()
	res, err := http.ReadResponse(bufio.NewReader(huge), nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("huge header: %d, want 431", res.StatusCode)
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("the upstream got %d requests, want none", n)
	}
}
