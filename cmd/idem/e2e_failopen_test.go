package main_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgo/idem/internal/pgtest"
	"github.com/idemgo/idem/internal/redistest"
)

// TestFailOpenStartsWithTheStoreDown: idem proxy --fail-open started while
// its store server is down starts all the same, saying so once: requests
// pass through unprotected (a retried key runs again), /healthz answers
// 200 saying the store is unavailable, /metrics counts store errors; once
// the server is up, within seconds, keys are protected again (a retry is
// replayed, the upstream ran once), and a SIGTERM stops it cleanly.
func TestFailOpenStartsWithTheStoreDown(t *testing.T) {
	t.Run("redis", func(t *testing.T) {
		srv := redistest.Start(t)
		testFailOpenStart(t, srv.URL(), srv.Stop, srv.Start)
	})
	t.Run("postgres", func(t *testing.T) {
		srv := pgtest.Start(t)
		testFailOpenStart(t, srv.URL(), srv.Stop, srv.Start)
	})
}

func testFailOpenStart(t *testing.T, dsn string, stop, start func() error) {
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	up := newCounting(t)
	p := startProxy(t, "--upstream", up.srv.URL, "--store", dsn, "--fail-open")
	p.waitOutput(t, "--fail-open: starting anyway, requests are forwarded unprotected until the store is reached")
	for i := range 2 {
		if r := send(t, p.base, "early-1", `{}`); r.status != 201 || r.replayed {
			t.Fatalf("request %d with the store not reached: %+v, want the upstream's 201", i, r)
		}
	}
	if n := up.runs("early-1"); n != 2 {
		t.Errorf("upstream ran %d times for a retried key with the store not reached, want 2 (unprotected)", n)
	}
	get := func(path string) (int, string) {
		res, err := http.Get(p.admin + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if code, body := get("/healthz"); code != 200 || body != "ok: store unavailable, requests forwarded unprotected (--fail-open)\n" {
		t.Errorf("/healthz with the store not reached: %d %q, want 200 saying so", code, body)
	}
	if _, body := get("/metrics"); !strings.Contains(body, "\nidem_store_errors_total 2\n") || !strings.Contains(body, `idem_requests_total{outcome="store_error"} 2`) {
		t.Errorf("/metrics with the store not reached does not count 2 store errors:\n%s", body)
	}

	started := time.Now()
	if err := start(); err != nil {
		t.Fatal(err)
	}
	p.waitOutput(t, "requests are protected from now on")
	if d := time.Since(started); d > 15*time.Second {
		t.Errorf("store reached %s after it started, want within seconds", d)
	}
	first := send(t, p.base, "late-1", `{}`)
	again := send(t, p.base, "late-1", `{}`)
	if first.status != 201 || !again.replayed || again.body != first.body || up.runs("late-1") != 1 {
		t.Errorf("once the store is reached: %+v then %+v, upstream ran %d; want 201, then its replay, one run", first, again, up.runs("late-1"))
	}
	if code, body := get("/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz once the store is reached: %d %q, want 200 ok", code, body)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.wait(); err != nil {
		t.Errorf("proxy after SIGTERM: %v, want exit 0\n%s", err, p.output)
	}
	if out := p.output.String(); strings.Count(out, "starting anyway") != 1 {
		t.Errorf("the start-up warning is not given once:\n%s", out)
	}
}

// TestFailOpenShutdownWhileTheStoreIsDown: a proxy --fail-open that has
// not reached its store yet stops at once, and cleanly, on SIGTERM.
func TestFailOpenShutdownWhileTheStoreIsDown(t *testing.T) {
	up := newCounting(t)
	p := startProxy(t, "--upstream", up.srv.URL, "--store", "redis://"+freeAddr(t), "--fail-open")
	time.Sleep(2 * time.Second) // a few attempts
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
		t.Fatalf("proxy still running 5 s after SIGTERM\n%s", p.output)
	}
	if p.err != nil {
		t.Errorf("proxy after SIGTERM: %v, want exit 0\n%s", p.err, p.output)
	}
}

// TestFailOpenStillRefusesMistakes: without --fail-open a store that
// cannot be reached still stops the proxy (exit 1, saying so); with it, a
// configuration mistake still does, at once, as it did: a DSN that does
// not read, a missing or wrong password, no such role or database, a
// replica, a node of a Redis Cluster given as redis://.
func TestFailOpenStillRefusesMistakes(t *testing.T) {
	proxy := []string{"proxy", "--upstream", "http://127.0.0.1:1", "--listen", "127.0.0.1:0"}
	down := "redis://" + freeAddr(t)
	if r := runIdem(t, t.TempDir(), nil, append(proxy, "--store", down)...); r.code != 1 || !strings.Contains(r.stderr, "idem proxy: redis at "+down+" is unreachable: ") {
		t.Errorf("proxy without --fail-open on a Redis that is down: exit %d, stderr %q; want 1 saying it is unreachable", r.code, r.stderr)
	}

	srv := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer c.Close()
	if err := c.ConfigSet(context.Background(), "requirepass", "right").Err(); err != nil {
		t.Fatal(err)
	}
	primary, replica := redistest.Start(t), redistest.Start(t)
	rc := redis.NewClient(&redis.Options{Addr: replica.Addr()})
	defer rc.Close()
	host, port, _ := strings.Cut(primary.Addr(), ":")
	if err := rc.ReplicaOf(context.Background(), host, port).Err(); err != nil {
		t.Fatal(err)
	}
	defer rc.ReplicaOf(context.Background(), "NO", "ONE")
	node := redistest.StartCluster(t, 3).Addrs()[0]
	pg, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	noDB, noUser := *pg, *pg
	noDB.Path = "/no_such_db"
	noUser.User = url.UserPassword("no_such_role", "secret")
	for _, tc := range []struct {
		name, dsn string
		code      int
		want      string
	}{
		{"unreadable redis URL", "redis://:secret/x@127.0.0.1:1", 2, "bad redis DSN"},
		{"unreadable postgres URL", "postgres://u:secret/x@127.0.0.1:1/db", 2, "bad postgres DSN"},
		{"redis without its password", "redis://" + srv.Addr(), 1, "wants a password"},
		{"redis wrong password", "redis://:wrong@" + srv.Addr(), 1, "authentication failed"},
		{"redis replica", replica.URL(), 1, "is a replica"},
		{"redis cluster node", "redis://" + node, 2, "is a node of a Redis Cluster"},
		{"postgres no database", noDB.String(), 1, `no database "no_such_db"`},
		{"postgres no role", noUser.String(), 1, `authentication failed for user "no_such_role"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runIdem(t, t.TempDir(), nil, append(proxy, "--fail-open", "--store", tc.dsn)...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.want) || strings.Contains(r.stderr, "starting anyway") {
				t.Errorf("exit %d, stderr %q; want %d, at once, mentioning %q", r.code, r.stderr, tc.code, tc.want)
			}
		})
	}
}
