package idemhttp_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgo/idem/idemhttp"
)

// rawRequest sends head (the request line and headers, without the blank
// line that ends them) and body to the server at url on a connection of
// its own, and returns the response and its body.
func rawRequest(t *testing.T, url, head, body string) (*http.Response, string) {
	t.Helper()
	c := dialRaw(t, url)
	if _, err := io.WriteString(c, head+"\r\nConnection: close\r\n\r\n"+body); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	return res, bodyOf(t, res)
}

// dialRaw connects to the server at url for an exchange written by hand,
// with a 10 s deadline; the connection is closed when the test ends.
func dialRaw(t *testing.T, url string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

// bodyOf reads and closes the body of res.
func bodyOf(t *testing.T, res *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// targetEcho is an upstream that answers with the request target it got,
// counting the requests.
func targetEcho(t *testing.T, runs *atomic.Int32) *httptest.Server {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, r.RequestURI)
	}))
	t.Cleanup(up.Close)
	return up
}

// The request target the upstream gets is the client's joined to the
// upstream's base path with a single slash, whether the base path ends
// with one or not (http://h/api and http://h/api/ alike), as
// ReverseProxy's SetURL joins them: the client's escaping kept (%2F stays
// %2F, %41 stays %41), its query and its own double slashes passed on as
// they are, and an absolute-form target (http://host/path) forwarded by
// its path. Protected requests and others alike.
func TestProxyJoinsUpstreamBasePath(t *testing.T) {
	var runs atomic.Int32
	up := targetEcho(t, &runs)
	for _, c := range []struct{ base, target, want string }{
		{"", "/x", "/x"},
		{"", "/", "/"},
		{"/api", "/x", "/api/x"},
		{"/api/", "/x", "/api/x"},
		{"/api", "/", "/api/"},
		{"/api/", "/", "/api/"},
		{"/api", "/v1/x/", "/api/v1/x/"},
		{"/api/", "//x", "/api//x"},
		{"/api", "/a%2Fb%20c", "/api/a%2Fb%20c"},
		{"/api/", "/a%41b", "/api/a%41b"},
		{"/a%2Fb", "/x", "/a%2Fb/x"},
		{"/a%2Fb/", "/c%2Fd", "/a%2Fb/c%2Fd"},
		{"/api", "/x?b=2&c=%2F", "/api/x?b=2&c=%2F"},
		{"/api", "/x?", "/api/x?"},
		{"/api", "http://other.example/x?q=1", "/api/x?q=1"},
		{"/api/", "http://other.example", "/api/"},
	} {
		p := serveProxy(t, up.URL+c.base, idemhttp.ProxyConfig{})
		for _, key := range []string{"", "Idempotency-Key: " + fmt.Sprintf("join-%q-%q", c.base, c.target) + "\r\n"} {
			res, body := rawRequest(t, p.URL, "POST "+c.target+" HTTP/1.1\r\nHost: client.example\r\n"+key+"Content-Length: 2", "{}")
			if res.StatusCode != 200 || body != c.want {
				t.Errorf("upstream %q, POST %s (key %t): %d %q, want the upstream to get %q", c.base, c.target, key != "", res.StatusCode, body, c.want)
			}
		}
	}
}

// An upstream URL with a query (which the idem command refuses, but the
// package takes) has it put ahead of each request's own, as ReverseProxy's
// SetURL does; the fingerprint is the client's target all the same.
func TestProxyUpstreamQueryGoesAheadOfTheClients(t *testing.T) {
	var runs atomic.Int32
	up := targetEcho(t, &runs)
	p := serveProxy(t, up.URL+"/api?tenant=1", idemhttp.ProxyConfig{})
	for _, c := range []struct{ target, want string }{
		{"/x", "/api/x?tenant=1"},
		{"/x?", "/api/x?tenant=1"},
		{"/x?b=2&tenant=9", "/api/x?tenant=1&b=2&tenant=9"},
	} {
		for _, key := range []string{"", "Idempotency-Key: query-" + c.target + "\r\n"} {
			res, body := rawRequest(t, p.URL, "POST "+c.target+" HTTP/1.1\r\nHost: client.example\r\n"+key+"Content-Length: 2", "{}")
			if res.StatusCode != 200 || body != c.want {
				t.Errorf("POST %s (key %t): %d %q, want the upstream to get %q", c.target, key != "", res.StatusCode, body, c.want)
			}
		}
	}
}

// A request target of "*" (asterisk form) names the server as a whole,
// for OPTIONS only (RFC 9112, section 3.2.4): an OPTIONS * reaches the
// upstream as OPTIONS *, not as a path under its base path; a request of
// another method with "*" is refused with 400, reaching neither the
// upstream nor the store, where ReverseProxy would make up a path, /%2A
// or /api/%2A, that the client never named.
func TestProxyAsteriskTarget(t *testing.T) {
	var runs atomic.Int32
	// Go's server answers OPTIONS * by itself unless told not to.
	up := httptest.NewUnstartedServer(targetEcho(t, &runs).Config.Handler)
	up.Config.DisableGeneralOptionsHandler = true
	up.Start()
	defer up.Close()
	for _, base := range []string{"", "/api", "/api/"} {
		cfg := idemhttp.ProxyConfig{}
		cfg.Middleware.Methods = []string{"POST", "OPTIONS"}
		p := httptest.NewUnstartedServer(serveProxy(t, up.URL+base, cfg).Config.Handler)
		p.Config.DisableGeneralOptionsHandler = true
		p.Start()
		defer p.Close()
		for _, key := range []string{"", "Idempotency-Key: star-" + base} {
			if key != "" {
				key += "-options\r\n"
			}
			res, body := rawRequest(t, p.URL, "OPTIONS * HTTP/1.1\r\nHost: client.example\r\n"+key+"Content-Length: 0", "")
			if res.StatusCode != 200 || body != "*" {
				t.Errorf("upstream %q: OPTIONS * (key %t): %d %q, want the upstream to get *", base, key != "", res.StatusCode, body)
			}
			key = strings.Replace(key, "-options", "-post", 1)
			before := runs.Load()
			res, body = rawRequest(t, p.URL, "POST * HTTP/1.1\r\nHost: client.example\r\n"+key+"Content-Length: 2", "{}")
			if res.StatusCode != 400 || runs.Load() != before {
				t.Errorf("upstream %q: POST * (key %t): %d %q, upstream ran %d times; want 400 without reaching the upstream", base, key != "", res.StatusCode, body, runs.Load()-before)
			}
		}
	}
}

// The key's record is reached by the client's request target, not the
// one the proxy rewrites for the upstream: the same request sent in
// origin form (/x?q=1) and absolute form (http://other.example/x?q=1),
// with different Host headers, is one request, run once and replayed;
// the rewritten target (/api/x?q=1) sent by a client is another request,
// refused as a reuse of the key.
func TestProxyFingerprintsTheClientsTarget(t *testing.T) {
	var runs atomic.Int32
	up := targetEcho(t, &runs)
	for _, upstreamHost := range []bool{false, true} {
		p := serveProxy(t, up.URL+"/api", idemhttp.ProxyConfig{UpstreamHost: upstreamHost})
		key := fmt.Sprintf("Idempotency-Key: fp-%t\r\nContent-Type: application/json\r\nContent-Length: 8", upstreamHost)
		before := runs.Load()
		res, body := rawRequest(t, p.URL, "POST /x?q=1 HTTP/1.1\r\nHost: a.example\r\n"+key, `{"a": 1}`)
		if res.StatusCode != 200 || body != "/api/x?q=1" {
			t.Fatalf("UpstreamHost %t: first: %d %q", upstreamHost, res.StatusCode, body)
		}
		res, body = rawRequest(t, p.URL, "POST http://other.example/x?q=1 HTTP/1.1\r\nHost: b.example\r\n"+key, `{"a":1 }`)
		if res.StatusCode != 200 || body != "/api/x?q=1" || res.Header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("UpstreamHost %t: absolute form: %d %q replayed=%q, want the first response replayed", upstreamHost, res.StatusCode, body, res.Header.Get("Idempotent-Replayed"))
		}
		res, body = rawRequest(t, p.URL, "POST /api/x?q=1 HTTP/1.1\r\nHost: a.example\r\n"+key, `{"a": 1}`)
		if res.StatusCode != http.StatusUnprocessableEntity {
			t.Errorf("UpstreamHost %t: the rewritten target: %d %q, want 422 (another request)", upstreamHost, res.StatusCode, body)
		}
		if n := runs.Load() - before; n != 1 {
			t.Errorf("UpstreamHost %t: the upstream ran %d times, want 1", upstreamHost, n)
		}
	}
}

// The ErrorWriter of the proxy's own answers (502 here) gets the client's
// request, as the middleware's answers do: its target, Host and
// Idempotency-Key header, not the request rewritten for the upstream.
func TestProxyErrorWriterGetsTheClientsRequest(t *testing.T) {
	down := httptest.NewServer(http.NotFoundHandler())
	addr := down.URL
	down.Close() // nothing listens there any more
	cfg := idemhttp.ProxyConfig{UpstreamHost: true}
	cfg.Middleware.ErrorWriter = func(w http.ResponseWriter, r *http.Request, p *idemhttp.Problem) {
		p.Detail = r.URL.String() + " " + r.Host + " " + r.Header.Get("Idempotency-Key")
		idemhttp.WriteProblem(w, r, p)
	}
	p := serveProxy(t, addr+"/api", cfg)
	for _, key := range []string{"", "ew-1"} {
		head := "POST /x?q=1 HTTP/1.1\r\nHost: client.example\r\nContent-Length: 2"
		if key != "" {
			head += "\r\nIdempotency-Key: " + key
		}
		res, body := rawRequest(t, p.URL, head, "{}")
		if want := `"detail":"/x?q=1 client.example ` + key + `"`; res.StatusCode != 502 || !strings.Contains(body, want) {
			t.Errorf("key %q: %d %s; want 502 with %s", key, res.StatusCode, body, want)
		}
	}
}
