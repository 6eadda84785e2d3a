package idemhttp_test

import (
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemgo/idem/idemhttp"
)

// Under an upstream with a base path, a request whose path has a ".."
// segment, sent as such, percent-encoded, behind an encoded slash or
// backslash, or with path parameters (..;x, which servlet containers read
// as ..), is refused (400, target-invalid) without reaching the store or the
// upstream, which, resolving dot segments, would serve it from outside the
// base path; with a key or without, whatever the method. Dots that are
// not a whole segment pass, and so does ".." when the upstream has no base
// path to leave. A "*" target but for OPTIONS gets the same problem type.
func TestProxyRefusesDotDotUnderBasePath(t *testing.T) {
	var runs atomic.Int32
	up := targetEcho(t, &runs)
	for _, base := range []string{"/api", "/api/"} {
		p := serveProxy(t, up.URL+base, idemhttp.ProxyConfig{})
		for i, target := range []string{"/../admin", "/x/../../admin", "/%2e%2e/admin", "/%2E%2E/admin", "/..%2Fadmin", "/x/..", "http://h.example/../admin",
			"/..;/admin", "/..;jsessionid=1/admin", "/%2e%2e;/admin", "/..%5Cadmin", "/x/..%5c..%5cadmin"} {
			for _, head := range []string{"POST", "GET"} {
				key := ""
				if head == "POST" {
					key = "Idempotency-Key: dotdot-" + base + "-" + string(rune('a'+i)) + "\r\n"
				}
				before := runs.Load()
				res, body := rawRequest(t, p.URL, head+" "+target+" HTTP/1.1\r\nHost: client.example\r\n"+key+"Content-Length: 2", "{}")
				var prob idemhttp.Problem
				_ = json.Unmarshal([]byte(body), &prob)
				if res.StatusCode != 400 || prob.Type != idemhttp.ProblemTargetInvalid || runs.Load() != before {
					t.Errorf("base %q, %s %s: %d %q, upstream reached %d times; want 400 %s without reaching it", base, head, target, res.StatusCode, body, runs.Load()-before, idemhttp.ProblemTargetInvalid)
				}
			}
		}
		for _, target := range []string{"/x/..y", "/.../x", "/x/.", "/a..b", "/a..;b", "/x;..", "/a%5Cb"} {
			res, body := rawRequest(t, p.URL, "GET "+target+" HTTP/1.1\r\nHost: client.example", "")
			if res.StatusCode != 200 || body != strings.TrimSuffix(base, "/")+target {
				t.Errorf("base %q, GET %s: %d %q, want it forwarded", base, target, res.StatusCode, body)
			}
		}
		res, body := rawRequest(t, p.URL, "POST * HTTP/1.1\r\nHost: client.example\r\nContent-Length: 2", "{}")
		if res.StatusCode != 400 || !strings.Contains(body, idemhttp.ProblemTargetInvalid) {
			t.Errorf("base %q, POST *: %d %q, want 400 %s", base, res.StatusCode, body, idemhttp.ProblemTargetInvalid)
		}
	}
	p := serveProxy(t, up.URL, idemhttp.ProxyConfig{})
	if res, body := rawRequest(t, p.URL, "GET /../x HTTP/1.1\r\nHost: client.example", ""); res.StatusCode != 200 || body != "/../x" {
		t.Errorf("no base path, GET /../x: %d %q, want it forwarded as it is", res.StatusCode, body)
	}
}
