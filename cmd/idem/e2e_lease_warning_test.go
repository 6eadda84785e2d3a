package main_test

import (
	"strings"
	"testing"
)

// TestProxyWarnsOfALeaseNoLongerThanTheStoreTimeout: a response's Commit
// is made again through a store outage for up to --store-timeout, with no
// heartbeat, so a --lease not longer than that lets a retry take the key
// over meanwhile: idem proxy says so at start-up, and not otherwise.
func TestProxyWarnsOfALeaseNoLongerThanTheStoreTimeout(t *testing.T) {
	up := newCounting(t)
	const warning = "--lease 2s is not longer than --store-timeout 10s"
	short := startProxy(t, "--upstream", up.srv.URL, "--store", "memory", "--lease", "2s")
	if out := short.output.String(); !strings.Contains(out, warning) {
		t.Errorf("--lease 2s: output %q; want the warning %q", out, warning)
	}
	long := startProxy(t, "--upstream", up.srv.URL, "--store", "memory", "--lease", "11s")
	if out := long.output.String(); strings.Contains(out, "warning") {
		t.Errorf("--lease 11s: output %q; want no warning", out)
	}
}
