package main_test

import (
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/idemgo/idem/internal/redistest"
)

// TestShutdownWithRedisHung: a proxy on a Redis server that hangs (it
// accepts connections but answers nothing) exits within seconds of
// SIGTERM, after a request whose store call was left in flight. Closing
// the client waits for its batches under way for 30 s per node; the
// proxy gives up on them sooner.
func TestShutdownWithRedisHung(t *testing.T) {
	srv := redistest.Start(t)
	up := newRestartUpstream(t)
	p := startProxy(t, "--upstream", up.url, "--store", srv.URL(), "--store-timeout", "500ms")
	if r, err := post(p.base, "hung-warm"); err != nil || r.status != http.StatusCreated {
		t.Fatalf("warm-up: %+v %v", r, err)
	}
	srv.Freeze()
	t.Cleanup(srv.Thaw)
	if r, err := post(p.base, "hung-1"); err != nil || r.status != http.StatusServiceUnavailable {
		t.Fatalf("with Redis hung: %+v %v, want 503", r, err)
	}
	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	const bound = 15 * time.Second
	select {
	case <-p.exited:
		t.Logf("exited %v after SIGTERM", time.Since(start).Round(time.Millisecond))
	case <-time.After(bound):
		t.Fatalf("still running %v after SIGTERM with Redis hung", bound)
	}
}
