package main_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestScopeByFlag: --scope-by header:X-Api-Key keeps apart the callers
// of an API that authenticates by that header (the same key from two
// callers runs twice, a retry from one is replayed), and cookie:session
// by that cookie alone (another cookie changing between a request and
// its retry does not make it run again); a --scope-by the proxy cannot
// read is a usage mistake naming it.
func TestScopeByFlag(t *testing.T) {
	up := newRestartUpstream(t)
	send := func(base, key, name, value string) bool {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, base+"/charges", strings.NewReader(`{"amount":1}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		req.Header.Set(name, value)
		res, err := restartClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		if res.StatusCode != http.StatusCreated {
			t.Fatalf("%s %s: status %d, want 201", key, value, res.StatusCode)
		}
		return res.Header.Get("Idempotent-Replayed") == "true"
	}
	byHeader := startProxy(t, "--upstream", up.url, "--store", "memory", "--scope-by", "header:X-Api-Key")
	for i, c := range []struct {
		value  string
		replay bool
	}{{"caller-1", false}, {"caller-2", false}, {"caller-1", true}} {
		if got := send(byHeader.base, "by-header", "X-Api-Key", c.value); got != c.replay {
			t.Errorf("header request %d (%s): replayed %v, want %v", i, c.value, got, c.replay)
		}
	}
	if n := len(up.keyRuns("by-header")); n != 2 {
		t.Errorf("the upstream ran by-header %d times, want 2 (once per caller)", n)
	}
	byCookie := startProxy(t, "--upstream", up.url, "--store", "memory", "--scope-by", "cookie:session")
	for i, c := range []struct {
		cookie string
		replay bool
	}{{"session=s-1; _ga=1", false}, {"session=s-1; _ga=2", true}, {"session=s-2", false}} {
		if got := send(byCookie.base, "by-cookie", "Cookie", c.cookie); got != c.replay {
			t.Errorf("cookie request %d (%s): replayed %v, want %v", i, c.cookie, got, c.replay)
		}
	}
	if n := len(up.keyRuns("by-cookie")); n != 2 {
		t.Errorf("the upstream ran by-cookie %d times, want 2 (once per session)", n)
	}
	for _, bad := range []string{"header:", "cookie:a b", "token", "header:X-Api-Key:x"} {
		r := runIdem(t, t.TempDir(), nil, "proxy", "--upstream", up.url, "--store", "memory", "--scope-by", bad)
		if r.code != 2 || !strings.Contains(r.stderr, "--scope-by") {
			t.Errorf("--scope-by %q: exit %d, stderr %q; want 2 naming --scope-by", bad, r.code, r.stderr)
		}
	}
}
