package main_test

// End-to-end tests: they build the real idem binary, start it as a separate
// process in front of a counting upstream, and talk HTTP to it.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem/durable"
	"github.com/idemgo/idem/internal/pgtest"
	"github.com/idemgo/idem/internal/redistest"
	"github.com/idemgo/idem/internal/syncbuf"
)

var idemBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "idem-e2e-")
	if err != nil {
		panic(err)
	}
	idemBin = filepath.Join(dir, "idem")
	// The race-built binary sleeps a second at exit by default (for the
	// reports of other goroutines' races to come out); every idem command
	// and proxy stop of these tests would wait for it. Races are reported
	// all the same.
	_ = os.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	out, err := exec.Command("go", "build", "-race", "-o", idemBin, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "building idem: %v\n%s", err, out)
		os.Exit(1)
	}
	code := redistest.Main(pgtest.Wrap(m))
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// counting is an upstream API that counts how often it ran per key.
type counting struct {
	srv   *httptest.Server
	total atomic.Int32
	mu    sync.Mutex
	byKey map[string]int
	// block, when set, holds every request until it is closed.
	block chan struct{}
	// started receives once per request, when set.
	started chan struct{}
	size    int // response body size; 0 = small JSON
}

func newCounting(t *testing.T) *counting {
	c := &counting{byKey: map[string]int{}}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := c.total.Add(1)
		body, _ := io.ReadAll(r.Body)
		c.mu.Lock()
		c.byKey[r.Header.Get("Idempotency-Key")]++
		c.mu.Unlock()
		if c.started != nil {
			c.started <- struct{}{}
		}
		if c.block != nil {
			select {
			case <-c.block:
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Set-Cookie", "session=secret")
		w.WriteHeader(http.StatusCreated)
		if c.size > 0 {
			_, _ = w.Write(bytes.Repeat([]byte("r"), c.size))
			return
		}
		fmt.Fprintf(w, `{"run":%d,"bytes":%d}`, n, len(body))
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *counting) runs(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byKey[key]
}

type proxy struct {
	cmd    *exec.Cmd
	base   string
	admin  string
	output *syncbuf.Buffer
	exited chan struct{} // closed when the process has exited
	err    error         // its exit status, once exited is closed
}

// waitOutput waits, up to 30 s, until the proxy has printed want.
func (p *proxy) waitOutput(t *testing.T, want string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(p.output.String(), want); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the proxy did not print %q in 30 s:\n%s", want, p.output)
		}
	}
}

// wait waits for the process to exit and returns its exit status.
func (p *proxy) wait() error {
	<-p.exited
	return p.err
}

// freeAddr returns a loopback address free now, and never one it returned
// before in this test process: the port of a listener closed at once may
// be handed out again by the next call, and two addresses a test takes
// together (--listen and --admin) must differ.
func freeAddr(t *testing.T) string {
	t.Helper()
	for {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		_ = ln.Close()
		if _, seen := handedOut.LoadOrStore(addr, true); !seen {
			return addr
		}
	}
}

// handedOut holds the addresses freeAddr returned.
var handedOut sync.Map

// startProxy starts idem proxy with args and waits until /healthz is 200.
func startProxy(t *testing.T, args ...string) *proxy {
	t.Helper()
	return startProxyVia(t, nil, args...)
}

// startProxyVia is startProxy running the proxy through the command via
// (none when nil), which gets the binary and its arguments after its own
// and must exec the binary in its own process, as bash -c 'exec "$0" "$@"'
// does.
func startProxyVia(t *testing.T, via []string, args ...string) *proxy {
	t.Helper()
	listen, admin := freeAddr(t), freeAddr(t)
	p := &proxy{base: "http://" + listen, admin: "http://" + admin, output: &syncbuf.Buffer{}, exited: make(chan struct{})}
	argv := append(append(append([]string{}, via...), idemBin, "proxy", "--listen", listen, "--admin", admin), args...)
	p.cmd = exec.Command(argv[0], argv[1:]...)
	p.cmd.Stdout, p.cmd.Stderr = p.output, p.output
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(20 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("proxy output:\n%s", p.output)
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		res, err := http.Get(p.admin + "/healthz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				return p
			}
		}
		select {
		case <-p.exited:
			t.Fatalf("proxy exited: %v\n%s", p.err, p.output)
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("proxy not healthy\n%s", p.output)
	return nil
}

type reply struct {
	status   int
	body     string
	replayed bool
	header   http.Header
}

func send(t *testing.T, base, key, body string, hdr ...string) reply {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/charges", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return reply{status: res.StatusCode, body: string(b), replayed: res.Header.Get("Idempotent-Replayed") == "true", header: res.Header}
}

// sendUntilDone retries on 409 like a well-behaved client.
func sendUntilDone(t *testing.T, base, key, body string) reply {
	t.Helper()
	for {
		r := send(t, base, key, body)
		if r.status != http.StatusConflict {
			return r
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func randomNamespace(t *testing.T) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "e2e_" + hex.EncodeToString(b[:])
}

func sqliteDSN(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "idem.db") }

func TestReplayOnSQLite(t *testing.T) {
	up := newCounting(t)
	dsn := sqliteDSN(t)
	p := startProxy(t, "--upstream", up.srv.URL, "--store", dsn)
	first := send(t, p.base, "k1", `{"amount":1}`)
	second := send(t, p.base, "k1", `{ "amount" : 1 }`)
	if first.status != 201 || second.status != 201 || first.body != second.body || first.replayed || !second.replayed {
		t.Fatalf("first %+v, second %+v", first, second)
	}
	if second.header.Get("Set-Cookie") != "" {
		t.Error("Set-Cookie replayed")
	}
	if up.runs("k1") != 1 {
		t.Fatalf("upstream ran %d times", up.runs("k1"))
	}
	if r := send(t, p.base, "k1", `{"amount":2}`); r.status != 422 || !strings.Contains(r.body, "key-reused") {
		t.Errorf("mismatch: %+v", r)
	}
	// idem inspect shows the record.
	inspect := exec.Command(idemBin, "inspect", "--store", dsn, "--key", "k1")
	inspect.Env = testEnv()
	out, err := inspect.CombinedOutput()
	if err != nil {
		t.Fatalf("inspect: %v\n%s", err, out)
	}
	var rec map[string]any
	if err := json.Unmarshal(out, &rec); err != nil || rec["status"] != "committed" || rec["key"] != "k1" {
		t.Errorf("inspect printed %s (%v)", out, err)
	}
	// Metrics count what happened.
	res, err := http.Get(p.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := io.ReadAll(res.Body)
	res.Body.Close()
	for _, want := range []string{`idem_requests_total{outcome="executed"} 1`, `idem_replays_total 1`, `idem_mismatches_total 1`, `idem_store_seconds_count 3`} {
		if !strings.Contains(string(m), want) {
			t.Errorf("metrics lack %q:\n%s", want, m)
		}
	}
}

func TestFiftyConcurrentRequests(t *testing.T) {
	up := newCounting(t)
	p := startProxy(t, "--upstream", up.srv.URL, "--store", sqliteDSN(t))
	var wg sync.WaitGroup
	bodies := make([]string, 50)
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bodies[i] = sendUntilDone(t, p.base, "c1", `{"amount":5}`).body
		}()
	}
	wg.Wait()
	if n := up.runs("c1"); n != 1 {
		t.Fatalf("upstream ran %d times for 50 concurrent requests", n)
	}
	for _, b := range bodies {
		if b != bodies[0] {
			t.Fatalf("clients saw different responses: %q vs %q", b, bodies[0])
		}
	}
}

// testSharedStore: several proxies on one store, concurrent retries spread
// across them: one execution per key in total (H20).
func testSharedStore(t *testing.T, dsn string) {
	up := newCounting(t)
	ns := randomNamespace(t)
	var proxies []*proxy
	// One proxy sends each store call on its own, the others batch them:
	// both share the store.
	for _, batch := range []string{"false", "true", "true"} {
		proxies = append(proxies, startProxy(t, "--upstream", up.srv.URL, "--store", dsn, "--namespace", ns, "--batch-store-calls="+batch))
	}
	var wg sync.WaitGroup
	for k := range 5 {
		for i := range 12 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := sendUntilDone(t, proxies[i%3].base, fmt.Sprintf("shared-%d", k), `{"k":1}`)
				if r.status != 201 {
					t.Errorf("status %d: %s", r.status, r.body)
				}
			}()
		}
	}
	wg.Wait()
	for k := range 5 {
		if n := up.runs(fmt.Sprintf("shared-%d", k)); n != 1 {
			t.Errorf("key shared-%d ran %d times across 3 proxies", k, n)
		}
	}
}

func TestSeveralProxiesOnePostgres(t *testing.T) { testSharedStore(t, pgtest.URL(t)) }

func TestSeveralProxiesOneRedis(t *testing.T) { testSharedStore(t, redistest.URL(t)) }

// TestKilledProxy: a proxy SIGKILLed mid-request; after the lease a retry
// through another proxy runs once more, then replays (H16).
func TestKilledProxy(t *testing.T) {
	up := newCounting(t)
	up.block = make(chan struct{})
	up.started = make(chan struct{}, 4)
	dsn := sqliteDSN(t)
	a := startProxy(t, "--upstream", up.srv.URL, "--store", dsn, "--lease", "6s")
	go func() {
		req, _ := http.NewRequest(http.MethodPost, a.base+"/charges", strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "kill-1")
		if res, err := http.DefaultClient.Do(req); err == nil {
			res.Body.Close()
		}
	}()
	<-up.started
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = a.wait()
	close(up.block)
	b := startProxy(t, "--upstream", up.srv.URL, "--store", dsn, "--lease", "6s")
	if r := send(t, b.base, "kill-1", `{}`); r.status != 409 {
		t.Fatalf("retry within the dead proxy's lease: %d, want 409", r.status)
	}
	r := sendUntilDone(t, b.base, "kill-1", `{}`)
	if r.status != 201 || r.replayed {
		t.Fatalf("retry after the lease: %+v", r)
	}
	if r := send(t, b.base, "kill-1", `{}`); !r.replayed {
		t.Fatalf("third attempt not replayed: %+v", r)
	}
	if n := up.runs("kill-1"); n != 2 {
		t.Fatalf("upstream ran %d times, want 2 (the killed attempt and the takeover)", n)
	}
}

func TestStoreDownGives503(t *testing.T) {
	srv := redistest.Start(t)
	up := newCounting(t)
	p := startProxy(t, "--upstream", up.srv.URL, "--store", srv.URL())
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	r := send(t, p.base, "down-1", `{}`)
	if r.status != 503 || r.header.Get("Content-Type") != "application/problem+json" || up.runs("down-1") != 0 {
		t.Fatalf("store down: %+v, upstream ran %d", r, up.runs("down-1"))
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if r = send(t, p.base, "down-1", `{}`); r.status == 201 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if r.status != 201 || up.runs("down-1") != 1 {
		t.Fatalf("after the store came back: %+v, runs %d", r, up.runs("down-1"))
	}
}

// TestHealthzWithTheStoreDown: with the store down, /healthz answers 503;
// with --fail-open it answers 200, saying so, as the proxy forwards
// requests unprotected: a load balancer or Kubernetes acting on a 503
// would stop the traffic --fail-open lets through.
func TestHealthzWithTheStoreDown(t *testing.T) {
	srv := redistest.Start(t)
	up := newCounting(t)
	closed := startProxy(t, "--upstream", up.srv.URL, "--store", srv.URL())
	open := startProxy(t, "--upstream", up.srv.URL, "--store", srv.URL(), "--fail-open")
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	healthz := func(p *proxy) (int, string) {
		res, err := http.Get(p.admin + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if code, body := healthz(closed); code != 503 || body != "store unavailable\n" {
		t.Errorf("/healthz with the store down: %d %q, want 503", code, body)
	}
	if r := send(t, open.base, "open-1", `{}`); r.status != 201 {
		t.Fatalf("--fail-open with the store down: %+v, want the upstream's 201", r)
	}
	if code, body := healthz(open); code != 200 || body != "ok: store unavailable, requests forwarded unprotected (--fail-open)\n" {
		t.Errorf("/healthz with the store down and --fail-open: %d %q, want 200 saying so", code, body)
	}
}

func TestUpstreamDownGives502(t *testing.T) {
	up := newCounting(t)
	url := up.srv.URL
	up.srv.Close()
	p := startProxy(t, "--upstream", url, "--store", sqliteDSN(t))
	for range 2 {
		if r := send(t, p.base, "up-1", `{}`); r.status != 502 || !strings.Contains(r.body, "upstream-unavailable") {
			t.Fatalf("upstream down: %+v", r)
		}
	}
}

// TestUpstreamDownIsReportedOnce: with the upstream down, every request
// gets its 502, but the log does not get a line each: one, the next ones
// counted and reported at most every 10 s, and on exit, as store errors
// are (a proxy answering thousands of requests a second would otherwise
// write as many lines).
func TestUpstreamDownIsReportedOnce(t *testing.T) {
	up := newCounting(t)
	url := up.srv.URL
	up.srv.Close()
	p := startProxy(t, "--upstream", url, "--store", sqliteDSN(t))
	for i := range 5 {
		if r := send(t, p.base, fmt.Sprintf("down-%d", i), `{}`); r.status != 502 {
			t.Fatalf("upstream down: %+v, want 502", r)
		}
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	_ = p.wait()
	out := p.output.String()
	if n := strings.Count(out, "connection refused"); n != 2 || !strings.Contains(out, "4 more errors since the last report, the last: ") {
		t.Errorf("proxy output:\n%s\nwant one line for the upstream error, the next four counted and reported on exit", out)
	}
}

// TestTTLExpiry: a response is replayed while its --ttl lasts and not
// after it: the first request after the TTL runs the upstream again, and
// is recorded in turn.
//
// The binary runs on the wall clock, and a loaded machine may take any
// time to answer, so the test does not sleep for the TTL and hope: it sends
// the same request again and again until a reply is neither a replay nor a
// 409 (the first response can reach the client a moment before it is
// recorded), and judges each reply by when it came back. The record's TTL
// counts from its Begin, which comes after sent: a reply received less
// than the TTL after sent was decided within the TTL, and must not come
// from a new run. A record still replayed long after its TTL fails the
// test too. When the machine is so slow that no replay came back within
// the TTL, nothing showed that the record was replayed while it lasted,
// and the test starts over with another key, up to a few times.
//
// The lease is as long as the TTL (a record lives at least as long as its
// lease, so a longer one would keep it longer): the first request has
// three seconds to be recorded, not one.
func TestTTLExpiry(t *testing.T) {
	const ttl = 3 * time.Second
	up := newCounting(t)
	p := startProxy(t, "--upstream", up.srv.URL, "--store", sqliteDSN(t), "--ttl", ttl.String(), "--lease", ttl.String())
	for attempt := 1; ; attempt++ {
		key := fmt.Sprintf("ttl-%d", attempt)
		sent := time.Now()
		first := send(t, p.base, key, `{}`)
		if first.status != 201 || first.replayed {
			t.Fatalf("first request: %+v, want 201 from the upstream", first)
		}
		replays, inFlight := 0, 0
		var after reply
		var afterSent time.Time
	poll:
		for deadline := time.Now().Add(ttl + 30*time.Second); ; time.Sleep(20 * time.Millisecond) {
			afterSent = time.Now()
			r := send(t, p.base, key, `{}`)
			got := time.Since(sent)
			switch {
			case r.replayed:
				if r.status != 201 || r.body != first.body {
					t.Fatalf("replay %+v, want the first response %+v", r, first)
				}
				replays++
			case r.status == http.StatusConflict:
				inFlight++
			case got < ttl:
				t.Fatalf("%+v %s after the first request was sent, within the TTL of %s; want a replay", r, got, ttl)
			default:
				after = r
				break poll
			}
			if time.Now().After(deadline) {
				t.Fatalf("still replayed %s after the first request was sent, with a TTL of %s", got, ttl)
			}
		}
		if replays == 0 {
			if attempt == 5 {
				t.Fatalf("in %d attempts no replay came back within the TTL of %s (%d replies 409 in the last): the machine is too slow to tell, or nothing is replayed", attempt, ttl, inFlight)
			}
			t.Logf("attempt %d: no replay came back within the TTL of %s (%d replies 409); again with another key", attempt, ttl, inFlight)
			continue
		}
		if after.status != 201 || after.body == first.body {
			t.Fatalf("after the TTL: %+v, want a new response from the upstream (the first was %q)", after, first.body)
		}
		if n := up.runs(key); n != 2 {
			t.Fatalf("runs %d, want 2: the first request and the first after the TTL (%d replays between them)", n, replays)
		}
		// The run after the TTL was recorded in turn: retried until it is
		// replayed, each reply judged as above by a TTL from afterSent.
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			r := send(t, p.base, key, `{}`)
			got := time.Since(afterSent)
			if r.replayed {
				if r.body != after.body {
					t.Fatalf("replay %+v, want the response of the request after the TTL, %q", r, after.body)
				}
				break
			}
			if r.status != http.StatusConflict {
				if got < ttl {
					t.Fatalf("%+v %s after the request after the TTL was sent; want a replay of %q", r, got, after.body)
				}
				break // the machine was too slow to tell
			}
			if time.Now().After(deadline) {
				t.Fatalf("the request after the TTL is still in progress %s after it was sent", got)
			}
		}
		return
	}
}

func TestScopesAndLargeBodies(t *testing.T) {
	up := newCounting(t)
	up.size = 1 << 20
	p := startProxy(t, "--upstream", up.srv.URL, "--store", sqliteDSN(t), "--max-body", "2000000", "--max-capture", "2000000")
	big := `"` + strings.Repeat("b", 1<<20) + `"`
	a1 := send(t, p.base, "scope-1", big, "Authorization", "Bearer alice")
	b1 := send(t, p.base, "scope-1", `{"other":true}`, "Authorization", "Bearer bob")
	a2 := send(t, p.base, "scope-1", big, "Authorization", "Bearer alice")
	b2 := send(t, p.base, "scope-1", `{"other":true}`, "Authorization", "Bearer bob")
	if a1.status != 201 || b1.status != 201 || !a2.replayed || !b2.replayed || len(a2.body) != 1<<20 || a2.body != a1.body {
		t.Fatalf("scoped replays: alice %d/%v (%d bytes), bob %d/%v", a1.status, a2.replayed, len(a2.body), b1.status, b2.replayed)
	}
	if n := up.runs("scope-1"); n != 2 {
		t.Fatalf("runs %d, want one per caller", n)
	}
}

// TestGracefulShutdown: SIGTERM while a request runs; it completes and its
// result is recorded before the process exits. The proxy says it waits
// for the request, and, when no request runs, that it shuts down without
// saying it waits.
func TestGracefulShutdown(t *testing.T) {
	up, dsn, p := drainOnSignal(t, syscall.SIGTERM, "term-1")
	if want := "shutting down: waiting up to 30s (--shutdown-timeout) for 1 in-flight request to finish"; !strings.Contains(p.output.String(), want) {
		t.Errorf("proxy output lacks %q:\n%s", want, p.output)
	}
	q := startProxy(t, "--upstream", up.srv.URL, "--store", dsn)
	if r := send(t, q.base, "term-1", `{}`); !r.replayed {
		t.Fatalf("result of the drained request was not recorded: %+v", r)
	}
	if err := q.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := q.wait(); err != nil {
		t.Fatalf("idle proxy exit: %v\n%s", err, q.output)
	}
	if out := q.output.String(); !strings.Contains(out, "shutting down") || strings.Contains(out, "waiting") {
		t.Errorf("idle proxy output %q; want \"shutting down\" without waiting for requests", out)
	}
}

// A request still running when --shutdown-timeout ends is cut off: the
// proxy exits 1 saying so, and the key stays reserved (a retry gets 409)
// rather than being released for a second run while the upstream may
// still be at the first.
func TestShutdownTimeoutLeavesKeyReserved(t *testing.T) {
	up := newCounting(t)
	up.block = make(chan struct{})
	up.started = make(chan struct{}, 1)
	defer close(up.block)
	dsn := sqliteDSN(t)
	p := startProxy(t, "--upstream", up.srv.URL, "--store", dsn, "--shutdown-timeout", "500ms")
	go func() {
		req, _ := http.NewRequest("POST", p.base+"/charges", strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "cut-1")
		if res, err := http.DefaultClient.Do(req); err == nil {
			res.Body.Close()
		}
	}()
	<-up.started
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.wait(); err == nil || !strings.Contains(p.output.String(), "were cut off: their keys stay reserved") {
		t.Fatalf("proxy exit %v, want an error saying requests were cut off:\n%s", err, p.output)
	}
	q := startProxy(t, "--upstream", up.srv.URL, "--store", dsn)
	if r := send(t, q.base, "cut-1", `{}`); r.status != 409 {
		t.Fatalf("retry of the cut-off request: %+v, want 409", r)
	}
}

// A second SIGTERM or SIGINT during the graceful shutdown stops the proxy
// at once; so does a second SIGINT when the proxy was started with SIGINT
// ignored, as a background job of a non-interactive shell is (the first
// one still starts the graceful shutdown).
func TestSecondSignalStopsAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		sig  syscall.Signal
		via  []string
	}{
		{"SIGTERM", syscall.SIGTERM, nil},
		{"SIGINT", syscall.SIGINT, nil},
		{"SIGINT ignored at start", syscall.SIGINT, []string{"bash", "-c", `trap '' INT; exec "$0" "$@"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := newCounting(t)
			up.block = make(chan struct{})
			up.started = make(chan struct{}, 1)
			defer close(up.block)
			p := startProxyVia(t, tc.via, "--upstream", up.srv.URL, "--store", "memory", "--shutdown-timeout", "1m")
			go func() {
				req, _ := http.NewRequest("POST", p.base+"/x", strings.NewReader(`{}`))
				req.Header.Set("Idempotency-Key", "held")
				if res, err := http.DefaultClient.Do(req); err == nil {
					res.Body.Close()
				}
			}()
			<-up.started
			if err := p.cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			p.waitOutput(t, "shutting down") // the first one handled before the second comes
			if err := p.cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			select {
			case <-p.exited:
				if p.err == nil {
					t.Errorf("the proxy exited 0 after a second %v; want it stopped by the signal", tc.sig)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("the proxy still drains after a second %v", tc.sig)
			}
		})
	}
}

func TestStartupErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"no upstream", []string{"proxy"}, nil, "--upstream is required"},
		{"bad upstream", []string{"proxy", "--upstream", "ftp://x"}, nil, "not an absolute http or https URL"},
		{"bad dsn", []string{"proxy", "--upstream", "http://127.0.0.1:1", "--store", "mongo://x"}, nil, "unknown store DSN"},
		{"unreachable postgres", []string{"proxy", "--upstream", "http://127.0.0.1:1", "--store", "postgres://u:secret@127.0.0.1:1/db?connect_timeout=2"}, nil, "unreachable"},
		{"unreachable redis", []string{"proxy", "--upstream", "http://127.0.0.1:1", "--store", "redis://127.0.0.1:1"}, nil, "unreachable"},
		{"bad env", []string{"proxy"}, []string{"IDEM_TTL=soon"}, "IDEM_TTL"},
		{"password in a query", []string{"proxy", "--upstream", "http://127.0.0.1:1", "--store", "postgres://127.0.0.1:99999/db?password=secret"}, nil, "bad postgres DSN"},
		{"unreadable postgres URL", []string{"proxy", "--upstream", "http://127.0.0.1:1", "--store", "postgres://u:secret/x@127.0.0.1:1/db"}, nil, "postgres"},
		{"unreadable redis URL", []string{"proxy", "--upstream", "http://127.0.0.1:1", "--store", "redis://:secret/x@127.0.0.1:1"}, nil, "redis"},
		{"libpq string", []string{"proxy", "--upstream", "http://127.0.0.1:1", "--store", "host=127.0.0.1 password=secret"}, nil, "unknown store DSN"},
		{"upstream with a password", []string{"proxy", "--upstream", "ftp://admin:secret@127.0.0.1"}, nil, "not an absolute http or https URL"},
		{"sqlite in memory", []string{"proxy", "--upstream", "http://127.0.0.1:1", "--store", "sqlite::memory:"}, nil, "for a store in memory use the DSN memory"},
		{"sqlite URL", []string{"proxy", "--upstream", "http://127.0.0.1:1", "--store", "sqlite://idem.db"}, nil, "not a URL"},
		{"negative purge interval", []string{"proxy", "--upstream", "http://127.0.0.1:1", "--purge-interval", "-1s"}, nil, "--purge-interval -1s: want 0 (never) or more"},
		{"zero shutdown timeout", []string{"proxy", "--upstream", "http://127.0.0.1:1", "--shutdown-timeout", "0s"}, nil, "--shutdown-timeout 0s: want more than 0"},
		{"unreachable durable database", []string{"durable", "stats", "--db", "host=127.0.0.1 port=1 user=u password=secret connect_timeout=2"}, nil, "unreachable"},
		{"unknown command", []string{"frobnicate"}, nil, "unknown command"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A command that starts instead of failing is killed, not
			// waited for; it runs in a directory of its own.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, idemBin, tc.args...)
			cmd.Dir = t.TempDir()
			cmd.Env = testEnv(tc.env...)
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), tc.want) {
				t.Fatalf("exit %v, output %q; want a failure mentioning %q", err, out, tc.want)
			}
			if strings.Contains(string(out), "secret") {
				t.Errorf("output leaks the password: %s", out)
			}
		})
	}
}

func TestFlagsFromEnvironment(t *testing.T) {
	up := newCounting(t)
	listen := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, idemBin, "proxy")
	cmd.Env = testEnv("IDEM_UPSTREAM="+up.srv.URL, "IDEM_LISTEN="+listen, "IDEM_STORE=memory", "IDEM_REQUIRE_KEY=true")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }()
	var r reply
	for i := 0; i < 300; i++ {
		req, _ := http.NewRequest(http.MethodPost, "http://"+listen+"/x", strings.NewReader(`{}`))
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			r = reply{status: res.StatusCode, body: string(b)}
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r.status != 400 || !strings.Contains(r.body, "key-missing") {
		t.Fatalf("IDEM_REQUIRE_KEY not applied: %+v\n%s", r, out.String())
	}
}

// lossyRelay forwards TCP connections to target, but drops the first
// response: it reads it from target and closes the client's connection
// without passing it on, as a network that loses a reply would.
func lossyRelay(t *testing.T, target string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var dropped atomic.Bool
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				u, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer u.Close()
				go func() { _, _ = io.Copy(u, c) }()
				if dropped.CompareAndSwap(false, true) {
					// Wait for the reply to start, then lose it.
					var b [1]byte
					_, _ = u.Read(b[:])
					return
				}
				_, _ = io.Copy(c, u)
			}()
		}
	}()
	return ln.Addr().String()
}

// TestLostResponseIsReplayedToRetry (H22): a client that retries on its
// own with the same key, as Stripe's SDKs do (a key on every POST, reused
// on network errors and on 409), gets the recorded response when the
// first one is lost on the network; the upstream ran once.
//
// The client retries until it gets an answer other than 409, however long
// the first request takes to be recorded on a loaded machine (a retry gets
// 409 until then), within a minute; each attempt may take as long.
func TestLostResponseIsReplayedToRetry(t *testing.T) {
	up := newCounting(t)
	p := startProxy(t, "--upstream", up.srv.URL, "--store", sqliteDSN(t))
	relay := lossyRelay(t, strings.TrimPrefix(p.base, "http://"))
	const patience = time.Minute
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: patience}
	key := "sdk-generated-" + randomNamespace(t)
	var errs []error
	var final reply
	conflicts := 0
	for deadline := time.Now().Add(patience); ; {
		if time.Now().After(deadline) {
			t.Fatalf("no answer but 409 in %s: %d attempts failed (the first: %v), %d got 409", patience, len(errs), errs[:min(len(errs), 3)], conflicts)
		}
		req, _ := http.NewRequest(http.MethodPost, "http://"+relay+"/v1/charges", strings.NewReader(`{"amount":2000,"currency":"usd"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		res, err := client.Do(req)
		if err != nil {
			errs = append(errs, err)
			time.Sleep(50 * time.Millisecond)
			continue
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode == http.StatusConflict {
			conflicts++
			time.Sleep(100 * time.Millisecond)
			continue
		}
		final = reply{status: res.StatusCode, body: string(b), replayed: res.Header.Get("Idempotent-Replayed") == "true"}
		break
	}
	t.Logf("%d attempts failed (the first: %v), %d got 409", len(errs), errs[:min(len(errs), 3)], conflicts)
	if len(errs) == 0 {
		t.Fatal("the relay lost no response")
	}
	if final.status != 201 || !final.replayed {
		t.Fatalf("after the lost response: %+v (errors %v, %d times 409)", final, errs, conflicts)
	}
	if n := up.runs(key); n != 1 {
		t.Fatalf("upstream ran %d times, want 1", n)
	}
}

// TestRedisCluster: the proxy on a real three-master Redis Cluster, named by
// a redis-cluster:// DSN; two proxies, one execution per key.
func TestRedisCluster(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	addrs := c.Addrs()
	dsn := "redis-cluster://" + addrs[0] + "?addr=" + strings.Join(addrs[1:], "&addr=")
	up := newCounting(t)
	a := startProxy(t, "--upstream", up.srv.URL, "--store", dsn)
	b := startProxy(t, "--upstream", up.srv.URL, "--store", dsn)
	for k := range 10 {
		key := fmt.Sprintf("cluster-%d", k)
		r1 := sendUntilDone(t, a.base, key, `{}`)
		r2 := sendUntilDone(t, b.base, key, `{}`)
		if r1.status != 201 || !r2.replayed || r1.body != r2.body {
			t.Fatalf("%s: %+v then %+v", key, r1, r2)
		}
		if n := up.runs(key); n != 1 {
			t.Fatalf("%s ran %d times", key, n)
		}
	}
}

// TestDurableCommands drives idem durable against a real engine database.
func TestDurableCommands(t *testing.T) {
	url := pgtest.URL(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	type state struct{ N int }
	fsm, err := durable.NewFSM(durable.FSMConfig[state]{
		Name: "order", Initial: "wait",
		Steps: map[string]durable.StepFunc[state]{
			"wait": func(context.Context, *durable.Step[state]) (durable.Outcome, error) {
				return durable.Await("wait", "paid"), nil
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	c, err := durable.NewClient(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	id, err := c.Insert(ctx, fsm.With(state{N: 1}), &durable.InsertOpts{CorrelationKey: "order:7"})
	if err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, error) {
		out, err := exec.Command(idemBin, append([]string{"durable"}, args...)...).CombinedOutput()
		return string(out), err
	}
	out, err := run("list", "--db", url, "--status", "runnable")
	if err != nil || !strings.Contains(out, `"correlation_key": "order:7"`) {
		t.Fatalf("list: %v\n%s", err, out)
	}
	// --key is read per command: a key exported for idem inspect, or
	// IDEM_KEY, does not filter the list; IDEM_DURABLE_LIST_KEY does.
	list := func(env ...string) string {
		cmd := exec.Command(idemBin, "durable", "list", "--db", url)
		cmd.Env = testEnv(env...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("list with %q: %v\n%s", env, err, out)
		}
		return string(out)
	}
	if out := list("IDEM_KEY=order:none", "IDEM_INSPECT_KEY=order:none", "IDEM_DURABLE_INSPECT_KEY=order:none"); !strings.Contains(out, `"correlation_key": "order:7"`) {
		t.Fatalf("list with another command's key variable: %s", out)
	}
	if out := list("IDEM_DURABLE_LIST_KEY=order:none"); strings.TrimSpace(out) != "[]" {
		t.Fatalf("list with IDEM_DURABLE_LIST_KEY=order:none: %s, want []", out)
	}
	out, err = run("signal", "--db", url, "--key", "order:7", "--name", "paid", "--payload", `{"amount":5}`, "--dedup", "evt-1")
	if err != nil || !strings.Contains(out, `"signalled": true`) {
		t.Fatalf("signal: %v\n%s", err, out)
	}
	out, err = run("inspect", "--db", url, "--key", "order:7")
	if err != nil || !strings.Contains(out, fmt.Sprintf(`"id": %d`, id)) || !strings.Contains(out, `"paid"`) {
		t.Fatalf("inspect: %v\n%s", err, out)
	}
	out, err = run("stats", "--db", url)
	if err != nil || !strings.Contains(out, `"runnable": 1`) {
		t.Fatalf("stats: %v\n%s", err, out)
	}
	if _, err := c.Insert(ctx, fsm.With(state{N: 2}), &durable.InsertOpts{RateLimit: "partner:acme"}); err != nil {
		t.Fatal(err)
	}
	out, err = run("buckets", "--db", url)
	if err != nil || !strings.Contains(out, `"key": "partner:acme"`) || !strings.Contains(out, `"waiting": 1`) {
		t.Fatalf("buckets: %v\n%s", err, out)
	}
	if out, err := run("signal", "--db", url, "--key", "order:8", "--name", "paid"); err == nil || !strings.Contains(out, "no") {
		t.Fatalf("signal to a free key: %v\n%s", err, out)
	}
	if out, err := run("list"); err == nil || !strings.Contains(out, "--db") {
		t.Fatalf("list without --db: %v\n%s", err, out)
	}
}

func TestDurableCancelAndRetryCommands(t *testing.T) {
	url := pgtest.URL(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	type state struct{ N int }
	fsm, err := durable.NewFSM(durable.FSMConfig[state]{
		Name: "order", Initial: "wait",
		Steps: map[string]durable.StepFunc[state]{
			"wait": func(context.Context, *durable.Step[state]) (durable.Outcome, error) {
				return durable.Await("wait", "paid"), nil
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	c, err := durable.NewClient(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	live, err := c.Insert(ctx, fsm.With(state{}), &durable.InsertOpts{CorrelationKey: "order:1"})
	if err != nil {
		t.Fatal(err)
	}
	failed, err := c.Insert(ctx, fsm.With(state{}), &durable.InsertOpts{CorrelationKey: "order:2"})
	if err != nil {
		t.Fatal(err)
	}
	// No engine runs here: fail the second instance as its step would.
	if _, err := pool.Exec(ctx, `UPDATE durable_instance SET status = 'failed', finished_at = now() WHERE id = $1`, failed); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, error) {
		out, err := exec.Command(idemBin, append([]string{"durable"}, args...)...).CombinedOutput()
		return string(out), err
	}

	out, err := run("cancel", "--db", url, "--key", "order:1", "--reason", "customer left")
	if err != nil || !strings.Contains(out, `"cancelled": true`) {
		t.Fatalf("cancel: %v\n%s", err, out)
	}
	if in, err := c.Get(ctx, live); err != nil || in.Status != durable.StatusCancelled || in.Error != "customer left" {
		t.Fatalf("after cancel: %+v, %v", in, err)
	}
	if out, err := run("cancel", "--db", url, "--id", fmt.Sprint(live)); err == nil || !strings.Contains(out, "ended") {
		t.Fatalf("cancel of a cancelled instance: %v\n%s", err, out)
	}
	if out, err := run("retry", "--db", url, "--id", fmt.Sprint(live)); err == nil || !strings.Contains(out, "not failed") {
		t.Fatalf("retry of a cancelled instance: %v\n%s", err, out)
	}

	out, err = run("retry", "--db", url, "--key", "order:2")
	if err != nil || !strings.Contains(out, `"retried": true`) || !strings.Contains(out, fmt.Sprintf(`"id": %d`, failed)) {
		t.Fatalf("retry: %v\n%s", err, out)
	}
	if in, err := c.Get(ctx, failed); err != nil || in.Status != durable.StatusRunnable || in.Attempt != 1 {
		t.Fatalf("after retry: %+v, %v", in, err)
	}
	if out, err := run("retry", "--db", url, "--id", "1", "--key", "order:2"); err == nil || !strings.Contains(out, "not both") {
		t.Fatalf("retry with --id and --key: %v\n%s", err, out)
	}
	if out, err := run("retry", "--db", url, "--id", fmt.Sprint(failed), "--at", "tomorrow"); err == nil || !strings.Contains(out, "RFC 3339") {
		t.Fatalf("retry with a bad --at: %v\n%s", err, out)
	}
}

// TestHangupStopsGracefully: SIGHUP, sent when the terminal the proxy was
// started from closes, stops it as SIGTERM does: the request in flight
// completes, its result is recorded, and the proxy exits 0, rather than
// dying with the key reserved until its lease ends. Started with SIGHUP
// ignored (nohup), the proxy keeps it ignored and goes on serving.
func TestHangupStopsGracefully(t *testing.T) {
	up, dsn, _ := drainOnSignal(t, syscall.SIGHUP, "hup-1")
	q := startProxyVia(t, []string{"bash", "-c", `trap '' HUP; exec "$0" "$@"`}, "--upstream", up.srv.URL, "--store", dsn)
	if r := send(t, q.base, "hup-1", `{}`); !r.replayed {
		t.Fatalf("the result of the request drained on SIGHUP was not recorded: %+v", r)
	}
	if err := q.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	// Ignored, a SIGHUP changes nothing: give a mistaken shutdown the time
	// it would need to show, then check the proxy still serves.
	select {
	case <-q.exited:
		t.Fatalf("proxy started with SIGHUP ignored exited on SIGHUP: %v\n%s", q.err, q.output)
	case <-time.After(500 * time.Millisecond):
	}
	if r := send(t, q.base, "hup-2", `{}`); r.status != 201 || strings.Contains(q.output.String(), "shutting down") {
		t.Fatalf("proxy started with SIGHUP ignored, after a SIGHUP: %+v, output:\n%s", r, q.output)
	}
}

// drainOnSignal starts a proxy on a new SQLite database and sends it sig
// while a request with key runs upstream: once the proxy says it is
// shutting down the request is let finish, and it must get its 201 and
// the proxy exit 0. It returns the upstream, the database and the proxy.
func drainOnSignal(t *testing.T, sig syscall.Signal, key string) (*counting, string, *proxy) {
	t.Helper()
	up := newCounting(t)
	up.block = make(chan struct{})
	up.started = make(chan struct{}, 2)
	dsn := sqliteDSN(t)
	p := startProxy(t, "--upstream", up.srv.URL, "--store", dsn)
	done := make(chan reply)
	go func() { done <- send(t, p.base, key, `{}`) }()
	<-up.started
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	p.waitOutput(t, "shutting down")
	close(up.block)
	if r := <-done; r.status != 201 {
		t.Fatalf("in-flight request during the shutdown on %v: %+v", sig, r)
	}
	if err := p.wait(); err != nil {
		t.Fatalf("proxy exit after %v: %v, want 0\n%s", sig, err, p.output)
	}
	return up, dsn, p
}
