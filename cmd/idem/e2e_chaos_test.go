package main_test

// A chaos test: several idem proxies on one shared store, clients that
// retry each key until it is answered, and meanwhile proxies SIGKILLed and
// replaced, the store stopped and started again, and a slow upstream.

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/idemgo/idem/internal/pgtest"
	"github.com/idemgo/idem/internal/redistest"
)

// chaosStore is a store server the test may stop, and start again.
type chaosStore interface {
	URL() string
	Stop() error
	Start() error
}

// chaosUpstream is an upstream whose side effect, counted per key, happens
// when a request arrives; some keys are slow. Each proxy is given its own
// path prefix (/p1, /p2…) as its upstream, so that each run is known by
// the proxy that sent it.
type chaosUpstream struct {
	url  string
	mu   sync.Mutex
	n    int
	runs map[string][]*upstreamRun
}

// chaosDelay is how long the upstream takes for key number i: some keys
// take longer than the lease (2 s), which the proxy's heartbeats extend.
func chaosDelay(i int) time.Duration {
	switch i % 6 {
	case 0:
		return 2500 * time.Millisecond
	case 1:
		return 400 * time.Millisecond
	}
	return 0
}

func newChaosUpstream(t *testing.T) *chaosUpstream {
	u := &chaosUpstream{runs: map[string][]*upstreamRun{}}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		key := r.Header.Get("Idempotency-Key")
		var i int
		fmt.Sscanf(key[strings.LastIndexByte(key, '-')+1:], "%d", &i)
		u.mu.Lock()
		u.n++
		proxy, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		run := &upstreamRun{n: u.n, proxy: proxy, start: time.Now()}
		u.runs[key] = append(u.runs[key], run)
		u.mu.Unlock()
		defer func() {
			u.mu.Lock()
			run.end = time.Now()
			u.mu.Unlock()
		}()
		if d := chaosDelay(i); d > 0 {
			select {
			case <-time.After(d):
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
	}))
	t.Cleanup(ts.Close)
	u.url = ts.URL
	return u
}

// chaosAnswer is a client's final answer for a key.
type chaosAnswer struct {
	status   int
	body     string
	replayed bool
}

// fault is a time window during which a fault was under way: a proxy
// killed (proxy names it), or the store down.
type fault struct {
	what       string
	proxy      string
	start, end time.Time
}

// chaosProxy is a proxy of the test, with its name.
type chaosProxy struct {
	*proxy
	name string
}

type chaos struct {
	t      *testing.T
	up     *chaosUpstream
	args   []string
	began  time.Time
	mu     sync.Mutex
	n      int // proxies started
	live   []chaosProxy
	faults []fault

	attempts, conflicts, unavailable, badGateway, errs, cut atomic.Int64
}

func (c *chaos) pick() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.live[rand.IntN(len(c.live))].base
}

func (c *chaos) addFault(f fault) {
	c.mu.Lock()
	c.faults = append(c.faults, f)
	c.mu.Unlock()
	c.t.Logf("+%s: %s %s (%s)", f.start.Sub(c.began).Round(time.Millisecond), f.what, f.proxy, f.end.Sub(f.start).Round(time.Millisecond))
}

// start starts a proxy, its upstream's path naming it.
func (c *chaos) start(args ...string) {
	c.mu.Lock()
	c.n++
	name := fmt.Sprintf("p%d", c.n)
	c.mu.Unlock()
	p := startProxy(c.t, append([]string{"--upstream", c.up.url + "/" + name}, append(c.args, args...)...)...)
	c.mu.Lock()
	c.live = append(c.live, chaosProxy{p, name})
	c.mu.Unlock()
}

// client sends key's request through the proxies until it is answered
// other than 409, 502 or 503, or until deadline. An impatient client
// often gives up on a request before the answer, and sends it again.
func (c *chaos) client(key string, impatient bool, deadline time.Time) (chaosAnswer, bool) {
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: rand.IntN(2) == 0}}
	defer client.CloseIdleConnections()
	for time.Now().Before(deadline) {
		c.attempts.Add(1)
		ctx, cancel := context.WithCancel(context.Background())
		if impatient && rand.IntN(2) == 0 {
			ctx, cancel = context.WithTimeout(context.Background(), time.Duration(10+rand.IntN(800))*time.Millisecond)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.pick()+"/charges", strings.NewReader(`{"amount":100}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		res, err := client.Do(req)
		var body []byte
		if err == nil {
			body, err = io.ReadAll(res.Body)
			res.Body.Close()
		}
		cancel()
		switch {
		case err != nil && ctx.Err() != nil:
			c.cut.Add(1)
		case err != nil:
			c.errs.Add(1)
		case res.StatusCode == http.StatusConflict:
			c.conflicts.Add(1)
		case res.StatusCode == http.StatusServiceUnavailable:
			c.unavailable.Add(1)
		case res.StatusCode == http.StatusBadGateway:
			c.badGateway.Add(1)
		default:
			return chaosAnswer{status: res.StatusCode, body: string(body), replayed: res.Header.Get("Idempotent-Replayed") == "true"}, true
		}
		time.Sleep(time.Duration(50+rand.IntN(150)) * time.Millisecond)
	}
	return chaosAnswer{}, false
}

// killOne SIGKILLs a live proxy and starts another in its place.
func (c *chaos) killOne() {
	c.mu.Lock()
	i := rand.IntN(len(c.live))
	victim := c.live[i]
	c.live = append(c.live[:i:i], c.live[i+1:]...)
	c.mu.Unlock()
	at := time.Now()
	if err := victim.cmd.Process.Kill(); err != nil {
		c.t.Fatal(err)
	}
	_ = victim.wait()
	c.addFault(fault{what: "killed", proxy: victim.name, start: at, end: time.Now()})
	c.start()
}

// storeDown stops the store with stop for d, then starts it again.
func (c *chaos) storeDown(srv chaosStore, stop func() error, d time.Duration) {
	at := time.Now()
	if err := stop(); err != nil {
		c.t.Fatal(err)
	}
	time.Sleep(d)
	if err := srv.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.addFault(fault{what: fmt.Sprintf("store down for %s", d), start: at, end: time.Now()})
}

// testChaos runs three proxies on srv with a 2 s lease, and sends keys
// through them, each by three clients that retry it until it is answered
// other than 409, 502 or 503 (one of them often cutting its requests
// short), while proxies are SIGKILLed and replaced, the store goes down
// twice (once for longer than the lease) with stopStore, and some keys
// take longer than the lease upstream. Then:
//
//   - (a) a key's side effect ran once, or again only after a run that a
//     fault hurt: its proxy was killed during it or just after (H16), or
//     the store was down during it or just after (its lease lapsed, or its
//     Commit failed and the key was released or left to its lease);
//   - (b) every answer is the response of one of the key's runs; replays of
//     a key are all the same, and for a key that ran once every client
//     got its response;
//   - (c) once every client is answered, a request for each key is answered
//     within a lease and the slowest run (and a margin for a loaded
//     machine): no key is left in flight;
//   - (d) every proxy exits 0 on SIGTERM.
func testChaos(t *testing.T, srv chaosStore, stopStore func() error) {
	if testing.Short() {
		t.Skip("the chaos test takes about 15 s")
	}
	const (
		lease   = 2 * time.Second
		keys    = 150
		perKey  = 3
		stagger = 45 * time.Millisecond
		// slack is how long after a fault a run may still have been hurt by
		// it: its Commit under way when its proxy was killed or the store
		// went down, or a connection to the restarted store found broken.
		slack = 2 * time.Second
	)
	up := newChaosUpstream(t)
	c := &chaos{t: t, up: up, args: []string{"--store", srv.URL(), "--namespace", randomNamespace(t),
		"--lease", lease.String(), "--ttl", "1h", "--store-timeout", "1s", "--purge-interval", "1s", "--shutdown-timeout", "15s"}}
	// Two proxies batch their store calls, one does not.
	for _, batch := range []string{"true", "true", "false"} {
		c.start("--batch-store-calls=" + batch)
	}

	began := time.Now()
	c.began = began
	deadline := began.Add(90 * time.Second)
	answers := make([][]chaosAnswer, keys)
	var wg sync.WaitGroup
	for k := range keys {
		key := fmt.Sprintf("chaos-%d", k)
		answers[k] = make([]chaosAnswer, perKey)
		for j := range perKey {
			wg.Go(func() {
				time.Sleep(time.Duration(k)*stagger + time.Duration(rand.IntN(100))*time.Millisecond)
				a, ok := c.client(key, j == 0, deadline)
				if !ok {
					t.Errorf("%s: client %d got no answer but 409, 502 or 503 in %s", key, j, deadline.Sub(began))
				}
				answers[k][j] = a
			})
		}
	}

	// The faults, while the keys are sent.
	sleepUntil := func(d time.Duration) { time.Sleep(time.Until(began.Add(d))) }
	sleepUntil(700 * time.Millisecond)
	c.killOne()
	sleepUntil(1500 * time.Millisecond)
	c.storeDown(srv, srv.Stop, 1200*time.Millisecond)
	sleepUntil(3500 * time.Millisecond)
	c.killOne()
	sleepUntil(4200 * time.Millisecond)
	c.storeDown(srv, stopStore, 2500*time.Millisecond) // longer than the lease
	c.killOne()
	t.Logf("faults over after %s", time.Since(began))

	wg.Wait()
	t.Logf("clients answered after %s: %d attempts, %d 409, %d 503, %d 502, %d errors, %d cut by the client",
		time.Since(began), c.attempts.Load(), c.conflicts.Load(), c.unavailable.Load(), c.badGateway.Load(), c.errs.Load(), c.cut.Load())

	// (c) One more request per key, through a live proxy.
	final := make([]chaosAnswer, keys)
	finalStart := time.Now()
	const freeWithin = lease + 2500*time.Millisecond + 8*time.Second
	for k := range keys {
		wg.Go(func() {
			a, ok := c.client(fmt.Sprintf("chaos-%d", k), false, finalStart.Add(freeWithin))
			if !ok {
				t.Errorf("chaos-%d: stuck: still 409, 502 or 503 %s after every client was answered", k, freeWithin)
			}
			final[k] = a
		})
	}
	wg.Wait()
	t.Logf("final requests answered in %s", time.Since(finalStart))

	// (d) Every proxy exits cleanly on SIGTERM.
	for _, p := range c.live {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range c.live {
		select {
		case <-p.exited:
			if p.err != nil {
				t.Errorf("proxy %s exited with %v after SIGTERM:\n%s", p.name, p.err, p.output)
			}
		case <-time.After(20 * time.Second):
			t.Errorf("proxy %s still running 20 s after SIGTERM", p.name)
		}
	}

	up.mu.Lock()
	defer up.mu.Unlock()
	at := func(tm time.Time) time.Duration { return tm.Sub(began).Round(time.Millisecond) }
	// hurt names the fault that may have kept run from being recorded: the
	// kill of its proxy, if the run ended no more than slack before it (it
	// may seem to start after the kill: the upstream, on a loaded machine,
	// can be slow to read a request the proxy sent before it died), or an
	// outage of the store during the run or less than slack after it.
	hurt := func(r *upstreamRun) (string, bool) {
		for _, f := range c.faults {
			switch {
			case f.proxy != "" && f.proxy != r.proxy:
				continue
			case f.proxy != "" && r.end.Add(slack).Before(f.start):
				continue
			case f.proxy == "" && (r.start.After(f.end) || r.end.Add(slack).Before(f.start)):
				continue
			}
			return fmt.Sprintf("%s %s at +%s", f.what, f.proxy, at(f.start)), true
		}
		return "", false
	}
	reruns := map[string]int{}
	for k := range keys {
		key := fmt.Sprintf("chaos-%d", k)
		runs := up.runs[key]
		if len(runs) == 0 {
			t.Errorf("%s: never ran", key)
			continue
		}
		bodies := map[string]bool{}
		for _, r := range runs {
			bodies[runBody(key, r.n)] = true
			if r.end.IsZero() {
				t.Errorf("%s: run %d still running", key, r.n)
			}
		}
		// (a)
		for i, r := range runs[1:] {
			prev := runs[i]
			why, ok := hurt(prev)
			if !ok {
				t.Errorf("%s ran again (run %d by %s at +%s) after run %d (by %s, +%s to +%s, aborted %v), which no fault hurt",
					key, r.n, r.proxy, at(r.start), prev.n, prev.proxy, at(prev.start), at(prev.end), prev.aborted)
				continue
			}
			reruns[strings.Split(why, " at ")[0]]++
			t.Logf("%s ran again (run %d by %s at +%s) after run %d (by %s, +%s to +%s, aborted %v): %s",
				key, r.n, r.proxy, at(r.start), prev.n, prev.proxy, at(prev.start), at(prev.end), prev.aborted, why)
		}
		// (b)
		replay := ""
		for j, a := range append(answers[k], final[k]) {
			if a.status == 0 {
				continue // already reported
			}
			if a.status != http.StatusCreated || !bodies[a.body] {
				t.Errorf("%s: client %d got %d %q, not a response of the upstream's", key, j, a.status, a.body)
				continue
			}
			if a.replayed {
				if replay != "" && a.body != replay {
					t.Errorf("%s: replays differ: %q and %q", key, replay, a.body)
				}
				replay = a.body
			}
			if len(runs) == 1 && a.body != runBody(key, runs[0].n) {
				t.Errorf("%s: client %d got %q, the key ran once as run %d", key, j, a.body, runs[0].n)
			}
		}
	}
	t.Logf("%d keys; runs again after a fault: %v", keys, reruns)
}

func TestChaosPostgres(t *testing.T) {
	srv := pgtest.Start(t)
	testChaos(t, srv, srv.Kill) // a crash: what was committed survives
}

// TestChaosRedis stops the server (SHUTDOWN SAVE) each time: a killed
// Redis without persistence starts empty, which loses records by design.
func TestChaosRedis(t *testing.T) {
	srv := redistest.Start(t)
	testChaos(t, srv, srv.Stop)
}
