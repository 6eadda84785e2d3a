package main_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idemgo/idem/internal/pgtest"
)

// TestPostgresQuickRestartStaleConnections: after a Postgres restart
// quicker than a second, the connections the proxy's pool held are dead,
// but too recently used for the pool to check them before use; the first
// request to meet one gets 503, and the proxy then checks every
// connection idle since before that failure, so that the next requests
// are protected, instead of each dead connection (or each batch of
// pipelined calls on one) failing in turn.
func TestPostgresQuickRestartStaleConnections(t *testing.T) {
	srv := pgtest.Start(t)
	up := newRestartUpstream(t)
	p := startProxy(t, "--upstream", up.url, "--store", srv.URL(), "--lease", restartLease.String())
	// Several connections in the pool: requests at once, again and again.
	for round := range 5 {
		var wg sync.WaitGroup
		for i := range 16 {
			wg.Go(func() {
				if r, err := post(p.base, fmt.Sprintf("warm-%d-%d", round, i)); err != nil || r.status != 201 {
					t.Errorf("warm-up: %+v %v", r, err)
				}
			})
		}
		wg.Wait()
	}
	start := time.Now()
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Logf("restarted in %s", time.Since(start).Round(time.Millisecond))
	var failed []int
	for i := range 10 {
		r, err := post(p.base, fmt.Sprintf("after-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if r.status != 201 {
			failed = append(failed, i)
		}
	}
	if len(failed) > 1 || len(failed) == 1 && failed[0] != 0 {
		t.Errorf("requests %v of 10 sent one after another after a quick restart failed, want at most the first", failed)
	}
}
