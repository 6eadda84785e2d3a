package main_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/idemgo/idem/internal/redistest"
)

// TestRedisOutageAnsweredPromptly: with the Redis server down (refusing
// connections), a protected request is answered within a second: 503
// store-unavailable, or with --fail-open forwarded unprotected. Retrying
// dials for seconds per request would hold every request (and, with
// --fail-open, delay every forwarded one) for as long.
func TestRedisOutageAnsweredPromptly(t *testing.T) {
	srv := redistest.Start(t)
	up := newRestartUpstream(t)
	type run struct {
		name string
		p    *proxy
		want int
	}
	var runs []run
	for _, c := range []struct {
		name string
		args []string
		want int
	}{
		{"batched", nil, http.StatusServiceUnavailable},
		{"unbatched", []string{"--batch-store-calls=false"}, http.StatusServiceUnavailable},
		{"fail-open", []string{"--fail-open"}, http.StatusCreated},
	} {
		p := startProxy(t, append([]string{"--upstream", up.url, "--store", srv.URL()}, c.args...)...)
		if r, err := post(p.base, c.name+"-warm"); err != nil || r.status != http.StatusCreated {
			t.Fatalf("%s: warm-up %+v %v", c.name, r, err)
		}
		runs = append(runs, run{c.name, p, c.want})
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, c := range runs {
		for i := range 3 {
			start := time.Now()
			r, err := post(c.p.base, fmt.Sprintf("%s-down-%d", c.name, i))
			took := time.Since(start)
			if err != nil || r.status != c.want {
				t.Fatalf("%s: request %d with Redis down: %+v %v, want %d", c.name, i, r, err, c.want)
			}
			t.Logf("%s: request %d answered %d in %v", c.name, i, r.status, took.Round(time.Millisecond))
			if took > time.Second {
				t.Errorf("%s: request %d with Redis down answered %d after %v, want within a second", c.name, i, r.status, took.Round(time.Millisecond))
			}
		}
	}
}
