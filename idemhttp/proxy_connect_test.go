package idemhttp_test

import (
	"sync/atomic"
	"testing"

	"github.com/idemgo/idem/idemhttp"
)

// A CONNECT request, which asks a forward proxy for a tunnel, is refused
// with 400 by the reverse proxy, never forwarded: the upstream would get
// it as CONNECT / with the client's host:port as its Host, and what it
// answered would reach the client.
func TestProxyRefusesConnect(t *testing.T) {
	var runs atomic.Int32
	up := targetEcho(t, &runs)
	for _, base := range []string{"", "/api"} {
		p := serveProxy(t, up.URL+base, idemhttp.ProxyConfig{})
		res, body := rawRequest(t, p.URL, "CONNECT internal.example:22 HTTP/1.1\r\nHost: internal.example:22", "")
		if res.StatusCode != 400 || runs.Load() != 0 {
			t.Errorf("upstream %q: CONNECT: %d %q, upstream ran %d times; want 400 without reaching it", base, res.StatusCode, body, runs.Load())
		}
	}
}
