package main_test

// End-to-end tests of a store server restarting under a running idem
// proxy, which is not restarted: Postgres and Redis stopped and started
// again on the same address while requests flow, keys in flight as the
// server goes, and a Redis that comes back without its data.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgo/idem/internal/pgtest"
	"github.com/idemgo/idem/internal/redistest"
)

// restartLease is the --lease of the proxies in these tests: short, so that
// a key left reserved by a request the outage hurt is free again soon.
const restartLease = time.Second

// upstreamRun is one run of a test upstream for a key (restartUpstream,
// chaosUpstream).
type upstreamRun struct {
	n          int
	proxy      string    // the proxy that sent it, where the upstream tells them apart
	start, end time.Time // end is zero while it runs
	aborted    bool      // the proxy's request ended before the answer
}

// restartUpstream is an upstream that records each run per key, with its
// start and end, and every time a key ran twice at once. The next run of
// a key it holds waits until released, or until the proxy gives up on it.
type restartUpstream struct {
	url     string
	mu      sync.Mutex
	n       int
	runs    map[string][]*upstreamRun
	active  map[string]int
	overlap []string
	held    map[string]chan struct{}
}

func newRestartUpstream(t *testing.T) *restartUpstream {
	u := &restartUpstream{runs: map[string][]*upstreamRun{}, active: map[string]int{}, held: map[string]chan struct{}{}}
	ts := httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(ts.Close)
	u.url = ts.URL
	return u
}

func (u *restartUpstream) serve(w http.ResponseWriter, r *http.Request) {
	_, _ = io.ReadAll(r.Body)
	key := r.Header.Get("Idempotency-Key")
	u.mu.Lock()
	u.n++
	run := &upstreamRun{n: u.n, start: time.Now()}
	u.runs[key] = append(u.runs[key], run)
	if u.active[key]++; u.active[key] > 1 {
		u.overlap = append(u.overlap, fmt.Sprintf("%s: run %d started while another ran", key, run.n))
	}
	hold := u.held[key]
	delete(u.held, key) // only the first run is held
	u.mu.Unlock()
	defer func() {
		u.mu.Lock()
		run.end = time.Now()
		u.active[key]--
		u.mu.Unlock()
	}()
	if hold != nil {
		select {
		case <-hold:
		case <-r.Context().Done():
			u.mu.Lock()
			run.aborted = true
			u.mu.Unlock()
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = io.WriteString(w, runBody(key, run.n))
}

// hold makes the next run of key wait; release lets it answer.
func (u *restartUpstream) hold(key string) (release func()) {
	ch := make(chan struct{})
	u.mu.Lock()
	u.held[key] = ch
	u.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { close(ch) }) }
}

// keyRuns returns copies of key's runs.
func (u *restartUpstream) keyRuns(key string) []upstreamRun {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []upstreamRun
	for _, r := range u.runs[key] {
		out = append(out, *r)
	}
	return out
}

// runBody is the response of run n of key, from a test upstream.
func runBody(key string, n int) string { return fmt.Sprintf(`{"key":%q,"run":%d}`, key, n) }

// restartClient bounds every request of these tests, so that a proxy that
// hangs fails the test rather than stalling it.
var restartClient = &http.Client{Timeout: 30 * time.Second}

// post sends key's request to the proxy at base; unlike send it may be
// called from any goroutine.
func post(base, key string) (reply, error) {
	req, _ := http.NewRequest(http.MethodPost, base+"/charges", strings.NewReader(`{"amount":1}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	res, err := restartClient.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return reply{status: res.StatusCode, body: string(b), replayed: res.Header.Get("Idempotent-Replayed") == "true", header: res.Header}, err
}

// postUntilAnswered sends key's request until it is answered other than
// 409, failing t if that takes longer than within.
func postUntilAnswered(t *testing.T, base, key string, within time.Duration) reply {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		r, err := post(base, key)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		if r.status != http.StatusConflict {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still 409 %s on: the key is stuck", key, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitUntil polls cond until it holds, failing t after within.
func waitUntil(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(within); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
	}
}

// admin GETs path on p's admin address.
func admin(t *testing.T, p *proxy, path string) (int, string) {
	t.Helper()
	res, err := restartClient.Get(p.admin + path)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// metric is the value of the sample named name (with its labels) on p's
// /metrics, or -1 if there is none.
func metric(t *testing.T, p *proxy, name string) int64 {
	t.Helper()
	_, body := admin(t, p, "/metrics")
	for line := range strings.Lines(body) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+" "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("metric %s: %q", name, line)
			}
			return n
		}
	}
	return -1
}

// protectedAgain waits until p protects keys again after the store
// server came back: a new key runs once and its retry replays its
// response. Requests meanwhile may get 503, or pass through unprotected
// with --fail-open; each try uses a new key. It returns how long that took.
func protectedAgain(t *testing.T, p *proxy, up *restartUpstream, prefix string, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for i := 0; ; i++ {
		key := fmt.Sprintf("%s-back-%d", prefix, i)
		first, err := post(p.base, key)
		if err != nil {
			t.Fatal(err)
		}
		if first.status == http.StatusCreated && !first.replayed {
			again, err := post(p.base, key)
			if err != nil {
				t.Fatal(err)
			}
			if again.replayed {
				if again.body != first.body || len(up.keyRuns(key)) != 1 {
					t.Fatalf("%s: %+v then %+v, upstream ran %d times", key, first, again, len(up.keyRuns(key)))
				}
				return time.Since(start)
			}
		}
		if time.Since(start) > within {
			t.Fatalf("%s: not protected again %s after the store came back: %+v", prefix, within, first)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// heldRequest sends key's request, which the upstream holds, to base in
// the background, and returns once the upstream runs it, with the time it
// was sent and a channel that gives its reply.
func heldRequest(t *testing.T, up *restartUpstream, base, key string) (sent time.Time, answer <-chan reply, release func()) {
	t.Helper()
	release = up.hold(key)
	t.Cleanup(release)
	ch := make(chan reply, 1)
	sent = time.Now()
	go func() {
		r, err := post(base, key)
		if err != nil {
			r.body = err.Error()
		}
		ch <- r
	}()
	waitUntil(t, 10*time.Second, key+" reaches the upstream", func() bool {
		select {
		case r := <-ch:
			t.Fatalf("%s: answered %+v before it reached the upstream", key, r)
		default:
		}
		return len(up.keyRuns(key)) == 1
	})
	return sent, ch, release
}

// traffic sends requests to a proxy from a few clients until stopped:
// each a new key, every third sent twice in a row; it keeps every key
// and the replies each got.
type traffic struct {
	mu      sync.Mutex
	replies map[string][]reply
	keys    []string
	stop    chan struct{}
	done    sync.WaitGroup
}

func startTraffic(p *proxy, prefix string, clients int) *traffic {
	tr := &traffic{replies: map[string][]reply{}, stop: make(chan struct{})}
	for c := range clients {
		tr.done.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-tr.stop:
					return
				default:
				}
				key := fmt.Sprintf("%s-%d-%d", prefix, c, i)
				sends := 1
				if i%3 == 0 {
					sends = 2 // a retry
				}
				for range sends {
					r, err := post(p.base, key)
					if err != nil {
						r.body = err.Error()
					}
					tr.mu.Lock()
					if len(tr.replies[key]) == 0 {
						tr.keys = append(tr.keys, key)
					}
					tr.replies[key] = append(tr.replies[key], r)
					tr.mu.Unlock()
					if r.status == http.StatusServiceUnavailable {
						time.Sleep(10 * time.Millisecond) // the store is down: no busy loop
					}
				}
			}
		})
	}
	return tr
}

// executed counts the keys whose first reply was a 201 run for them.
func (tr *traffic) executed() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	n := 0
	for _, rs := range tr.replies {
		if rs[0].status == http.StatusCreated && !rs[0].replayed {
			n++
		}
	}
	return n
}

func (tr *traffic) end() {
	close(tr.stop)
	tr.done.Wait()
}

// TestStoreRestartPostgres: see testStoreRestart.
func TestStoreRestartPostgres(t *testing.T) {
	srv := pgtest.Start(t)
	testStoreRestart(t, srv)
}

// TestStoreRestartRedis: see testStoreRestart. Stop saves the data set
// (SHUTDOWN SAVE), so the records outlive the restart; the server's
// script cache does not, and every script is loaded again after NOSCRIPT.
func TestStoreRestartRedis(t *testing.T) {
	srv := redistest.Start(t)
	testStoreRestart(t, srv)
}

// testStoreRestart runs three proxies on srv, which is not restarted
// under them: one batching its store calls (the default), one not
// (--batch-store-calls=false), one with --fail-open. While requests flow
// through them (new keys, some sent twice), and a key is in flight in
// each of the first two, the store server is stopped, and later started
// again on the same address. Then:
//
//   - (a) during the outage a new key gets 503 store-unavailable without
//     reaching the upstream, and /healthz answers 503; with --fail-open
//     it is forwarded, unprotected (sent twice, it runs twice), and
//     /healthz answers 200 saying so;
//   - (b) a key in flight as the store went is given up once its lease
//     lapses with the store still down: its upstream request is cut
//     short, and its client gets 503; after the restart its retry runs
//     again, neither alongside the first run nor before the lease lapsed;
//   - (c) within seconds of the restart, each proxy protects keys again
//     (a new key runs once, its retry replays), /healthz answers 200 ok,
//     and /metrics counts the store errors;
//   - (d) every key the clients sent, batched calls in flight at the stop
//     among them, is answered within a lease and a margin: none is left
//     reserved; a key that ran once replays that run, and one that ran
//     again did so after a run the outage hurt;
//   - (e) while a key in flight during a second, short outage still
//     runs after the server is back, a retry gets 409; once it answered,
//     a retry replays it, or runs it again (its response could not be
//     recorded);
//   - (f) no key ever runs twice at once, and every proxy exits 0 on
//     SIGTERM.
func testStoreRestart(t *testing.T, srv chaosStore) {
	up := newRestartUpstream(t)
	common := []string{"--upstream", up.url, "--store", srv.URL(), "--namespace", randomNamespace(t),
		"--lease", restartLease.String(), "--ttl", "1h", "--store-timeout", "1s", "--shutdown-timeout", "10s"}
	batched := startProxy(t, common...)
	unbatched := startProxy(t, append(common, "--batch-store-calls=false")...)
	open := startProxy(t, append(common, "--fail-open")...)
	closed := []struct {
		name string
		p    *proxy
	}{{"batched", batched}, {"unbatched", unbatched}}

	// Requests flow; a key is in flight in each closed proxy.
	var flows []*traffic
	for _, c := range closed {
		flows = append(flows, startTraffic(c.p, c.name+"-flow", 6))
	}
	openFlow := startTraffic(open, "open-flow", 2)
	for i, tr := range flows {
		waitUntil(t, 20*time.Second, closed[i].name+": 20 keys run", func() bool { return tr.executed() >= 20 })
	}
	type inFlight struct {
		key    string
		p      *proxy
		sent   time.Time
		answer <-chan reply
	}
	var held []inFlight
	for _, c := range closed {
		key := c.name + "-held"
		sent, answer, _ := heldRequest(t, up, c.p.base, key)
		held = append(held, inFlight{key, c.p, sent, answer})
	}

	// The outage.
	stopped := time.Now()
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("store stopped in %s", time.Since(stopped).Round(time.Millisecond))
	for _, c := range closed {
		key := c.name + "-down"
		r, err := post(c.p.base, key)
		if err != nil {
			t.Fatal(err)
		}
		if r.status != 503 || !strings.Contains(r.body, "store-unavailable") || len(up.keyRuns(key)) != 0 {
			t.Errorf("%s with the store down: %+v, upstream ran %d times; want 503 store-unavailable, no run", c.name, r, len(up.keyRuns(key)))
		}
		if code, body := admin(t, c.p, "/healthz"); code != 503 || body != "store unavailable\n" {
			t.Errorf("%s: /healthz with the store down: %d %q, want 503", c.name, code, body)
		}
	}
	for i := range 2 {
		if r, err := post(open.base, "open-down"); err != nil || r.status != 201 || r.replayed {
			t.Errorf("--fail-open with the store down, request %d: %+v %v, want the upstream's 201", i, r, err)
		}
	}
	if n := len(up.keyRuns("open-down")); n != 2 {
		t.Errorf("--fail-open with the store down: a key sent twice ran %d times, want 2 (unprotected)", n)
	}
	if code, body := admin(t, open, "/healthz"); code != 200 || body != "ok: store unavailable, requests forwarded unprotected (--fail-open)\n" {
		t.Errorf("--fail-open: /healthz with the store down: %d %q, want 200 saying so", code, body)
	}
	// (b) The keys in flight are given up once their leases lapse.
	for _, h := range held {
		waitUntil(t, restartLease+10*time.Second, h.key+": the proxy gives up the upstream request once the lease lapsed", func() bool {
			runs := up.keyRuns(h.key)
			return runs[0].aborted
		})
		if r := <-h.answer; r.status != 503 {
			t.Errorf("%s: the client of a request whose lease lapsed with the store down got %+v, want 503", h.key, r)
		}
	}

	// The store comes back; the proxies recover without a restart.
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	for _, c := range []struct {
		name string
		p    *proxy
	}{closed[0], closed[1], {"open", open}} {
		d := protectedAgain(t, c.p, up, c.name, 20*time.Second)
		t.Logf("%s: protected again %s after the restart", c.name, d.Round(time.Millisecond))
		// go-redis, once enough dials failed, answers a dial with the last
		// failure until its probe, once a second, reaches the server: a
		// ping may still fail for a second after a request went through.
		waitUntil(t, 3*time.Second, c.name+": /healthz 200 ok once the store is back", func() bool {
			code, body := admin(t, c.p, "/healthz")
			return code == 200 && body == "ok\n"
		})
		if n := metric(t, c.p, "idem_store_errors_total"); n < 1 {
			t.Errorf("%s: idem_store_errors_total %d after the outage, want at least 1", c.name, n)
		}
		if n := metric(t, c.p, `idem_requests_total{outcome="store_error"}`); n < 1 {
			t.Errorf(`%s: idem_requests_total{outcome="store_error"} %d after the outage, want at least 1`, c.name, n)
		}
	}
	for _, h := range held {
		r := postUntilAnswered(t, h.p.base, h.key, 10*time.Second)
		runs := up.keyRuns(h.key)
		if r.status != 201 || r.replayed || len(runs) != 2 || r.body != runBody(h.key, runs[1].n) {
			t.Errorf("%s: retry after the restart: %+v, %d runs; want it run again", h.key, r, len(runs))
		} else if !runs[1].start.After(h.sent.Add(restartLease)) || runs[1].start.Before(runs[0].end) {
			t.Errorf("%s ran again at %s, its first run sent at %s and ended at %s: before the lease lapsed", h.key, runs[1].start, h.sent, runs[0].end)
		}
	}

	// (d) Every key sent is answered, none is left reserved.
	for _, tr := range append(flows, openFlow) {
		tr.end()
	}
	for i, tr := range flows {
		var wg sync.WaitGroup
		errs := make(chan string, len(tr.keys))
		// A few keys at a time: the unbatched proxy has a pool of
		// max(4, GOMAXPROCS) connections, and hundreds of requests at once
		// wait for one past --store-timeout on a loaded machine, getting
		// 503 store-unavailable: load shed, not a key left unsettled.
		checking := make(chan struct{}, 8)
		for _, key := range tr.keys {
			wg.Go(func() {
				checking <- struct{}{}
				defer func() { <-checking }()
				r, ok := answerWithin(closed[i].p.base, key, restartLease+10*time.Second)
				if msg := checkSettled(up, key, r, ok, stopped); msg != "" {
					errs <- msg
				}
			})
		}
		wg.Wait()
		close(errs)
		n := 0
		for msg := range errs {
			if n++; n <= 10 {
				t.Error(msg)
			}
		}
		t.Logf("%s: %d keys sent, %d of them run at the first request; %d not settled", closed[i].name, len(tr.keys), tr.executed(), n)
	}

	// (e) A short outage, the server back before the keys in flight
	// answer: a retry while one still runs gets 409 (unless its lease
	// lapsed meanwhile and it was given up), and once it answered, a
	// retry replays it or runs it again.
	type shortKey struct {
		key    string
		p      *proxy
		answer <-chan reply
	}
	var short []shortKey
	var releases []func()
	for _, c := range closed {
		key := c.name + "-short"
		_, answer, release := heldRequest(t, up, c.p.base, key)
		short = append(short, shortKey{key, c.p, answer})
		releases = append(releases, release)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	for _, c := range closed {
		protectedAgain(t, c.p, up, c.name+"-short", 20*time.Second)
	}
	for _, k := range short {
		if up.keyRuns(k.key)[0].aborted {
			t.Logf("%s: given up during the short outage", k.key)
			continue
		}
		r, err := post(k.p.base, k.key)
		if err != nil {
			t.Fatal(err)
		}
		if r.status != 409 && !up.keyRuns(k.key)[0].aborted {
			t.Errorf("%s: retry while the first request runs: %+v, want 409", k.key, r)
		}
	}
	for _, release := range releases {
		release()
	}
	for _, k := range short {
		first := <-k.answer
		r := postUntilAnswered(t, k.p.base, k.key, restartLease+10*time.Second)
		runs := up.keyRuns(k.key)
		if r.status != 201 || len(runs) > 2 || r.body != runBody(k.key, runs[len(runs)-1].n) || r.replayed != (len(runs) == 1) {
			t.Errorf("%s: retry once the first request answered: %+v, the upstream ran %d times; want a replay of its run, or a second run", k.key, r, len(runs))
		}
		t.Logf("%s: the first request got %d, the retry %d (replayed %v) after %d runs", k.key, first.status, r.status, r.replayed, len(runs))
	}
	t.Logf("restart to the end of the checks: %s", time.Since(restarted).Round(time.Millisecond))

	// (f)
	up.mu.Lock()
	for _, o := range up.overlap {
		t.Error(o)
	}
	up.mu.Unlock()
	for _, p := range []*proxy{batched, unbatched, open} {
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := p.wait(); err != nil {
			t.Errorf("proxy after SIGTERM: %v, want exit 0\n%s", err, p.output)
		}
	}
}

// answerWithin sends key's request until it is answered other than 409,
// or within has passed (false).
func answerWithin(base, key string, within time.Duration) (reply, bool) {
	deadline := time.Now().Add(within)
	for {
		r, err := post(base, key)
		if err == nil && r.status != http.StatusConflict {
			return r, true
		}
		if time.Now().After(deadline) {
			return r, false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkSettled checks the final answer r for a key a client sent around
// an outage that began at stopped, and says what is wrong with it, if
// anything: the key must be answered (ok) with a 201; when it ran once,
// by a replay of that run (it was recorded, or left to its lease and
// taken over by this very request); when it ran again, after a run that
// ended no earlier than shortly before the outage (a run that met it).
func checkSettled(up *restartUpstream, key string, r reply, ok bool, stopped time.Time) string {
	runs := up.keyRuns(key)
	switch {
	case !ok:
		return fmt.Sprintf("%s: still 409 after a lease and 10 s: left reserved (%d runs)", key, len(runs))
	case r.status != 201:
		return fmt.Sprintf("%s: final answer %+v, want 201", key, r)
	case len(runs) == 0:
		return fmt.Sprintf("%s: answered 201 without a run", key)
	case r.body != runBody(key, runs[len(runs)-1].n):
		return fmt.Sprintf("%s: final answer %q, not the last of its %d runs", key, r.body, len(runs))
	}
	for i := 1; i < len(runs); i++ {
		if prev := runs[i-1]; prev.end.Before(stopped.Add(-2 * time.Second)) {
			return fmt.Sprintf("%s ran again (run %d) after run %d, which ended %s before the outage", key, runs[i].n, prev.n, stopped.Sub(prev.end))
		}
	}
	return ""
}

// TestRedisRestartWithoutData: a Redis that comes back without its data
// (no persistence, killed) under running proxies, batched and not. What
// it held is gone, by design (see redisstore's Durability): a key
// recorded before runs again when retried, once, and is recorded anew;
// a key in flight loses its reservation, and the proxy gives up its
// upstream request at its next heartbeat (the record is gone, so the
// lease is lost), its client getting 503, before a retry runs it again;
// a retry sent before that heartbeat would run alongside it: a Redis that
// loses its data keeps no promise across the restart.
// The server's script cache is empty too: the store loads its scripts
// again (NOSCRIPT, then EVAL) and protects keys within seconds, without
// a store error that says NOSCRIPT; the proxies neither crash nor wedge,
// and exit 0 on SIGTERM.
func TestRedisRestartWithoutData(t *testing.T) {
	srv := redistest.Start(t)
	up := newRestartUpstream(t)
	common := []string{"--upstream", up.url, "--store", srv.URL(), "--lease", restartLease.String(), "--ttl", "1h", "--store-timeout", "1s"}
	proxies := []struct {
		name string
		p    *proxy
	}{
		{"batched", startProxy(t, common...)},
		{"unbatched", startProxy(t, append(common, "--batch-store-calls=false")...)},
	}
	// info is the number after prefix in the server's INFO section (up
	// to a comma), 0 when no line has prefix.
	info := func(section, prefix string) int {
		rc := redis.NewClient(&redis.Options{Addr: srv.Addr()})
		defer rc.Close()
		text, err := rc.Info(context.Background(), section).Result()
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(text) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), prefix); ok {
				v, _, _ = strings.Cut(v, ",")
				n, _ := strconv.Atoi(v)
				return n
			}
		}
		return 0
	}
	cachedScripts := func() int { return info("memory", "number_of_cached_scripts:") }

	type inFlight struct {
		key    string
		answer <-chan reply
	}
	var held []inFlight
	for _, c := range proxies {
		key := c.name + "-recorded"
		first := send(t, c.p.base, key, `{"amount":1}`)
		again := send(t, c.p.base, key, `{"amount":1}`)
		if first.status != 201 || !again.replayed {
			t.Fatalf("%s before the restart: %+v then %+v", key, first, again)
		}
		_, answer, _ := heldRequest(t, up, c.p.base, c.name+"-held")
		held = append(held, inFlight{c.name + "-held", answer})
	}
	if n := cachedScripts(); n == 0 {
		t.Fatal("no script cached in the server before the restart")
	}

	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	for _, c := range proxies {
		d := protectedAgain(t, c.p, up, c.name, 20*time.Second)
		t.Logf("%s: protected again %s after the restart", c.name, d.Round(time.Millisecond))
	}
	// The server came back without its scripts: the store, which sends a
	// script by its SHA1 and the whole script (EVAL) only when the server
	// answers NOSCRIPT, has sent EVAL to it (counted since it started, in
	// INFO commandstats, which Redis 6.0 has too). Its script cache is no
	// witness: the heartbeats of the keys in flight may load the scripts
	// again before the test can look at it.
	if n := info("commandstats", "cmdstat_eval:calls="); n == 0 {
		t.Error("the store sent the restarted server no EVAL: it met no NOSCRIPT")
	}
	if n := cachedScripts(); n == 0 {
		t.Error("no script cached in the server once keys are protected again")
	}

	// The key in flight: its next heartbeat finds its record gone.
	for _, h := range held {
		waitUntil(t, restartLease+10*time.Second, h.key+": the proxy gives up the upstream request once its record is gone", func() bool {
			return up.keyRuns(h.key)[0].aborted
		})
		if r := <-h.answer; r.status != 503 {
			t.Errorf("%s: the client of a request whose record was lost got %+v, want 503", h.key, r)
		}
	}
	for i, c := range proxies {
		key := held[i].key
		if r := postUntilAnswered(t, c.p.base, key, 10*time.Second); r.status != 201 || r.replayed || len(up.keyRuns(key)) != 2 {
			t.Errorf("%s: retry after the restart: %+v, upstream ran %d times; want it run again", key, r, len(up.keyRuns(key)))
		}
		key = c.name + "-recorded"
		r := send(t, c.p.base, key, `{"amount":1}`)
		runs := up.keyRuns(key)
		if r.status != 201 || r.replayed || len(runs) != 2 {
			t.Errorf("%s: retry of a key whose record was lost: %+v, upstream ran %d times; want it run again", key, r, len(runs))
		}
		if again := send(t, c.p.base, key, `{"amount":1}`); !again.replayed || again.body != r.body {
			t.Errorf("%s: recorded anew, then %+v, want %q replayed", key, again, r.body)
		}
	}

	up.mu.Lock()
	for _, o := range up.overlap {
		t.Error(o)
	}
	up.mu.Unlock()
	for _, c := range proxies {
		if strings.Contains(c.p.output.String(), "NOSCRIPT") {
			t.Errorf("%s: a store error mentions NOSCRIPT:\n%s", c.name, c.p.output)
		}
		if err := c.p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := c.p.wait(); err != nil {
			t.Errorf("%s after SIGTERM: %v, want exit 0\n%s", c.name, err, c.p.output)
		}
	}
}
