package idemhttp_test

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemgo/idem/idemhttp"
)

// expectContinue sends head (request line and headers, Expect:
// 100-continue among them) to the server at url, waits for its answer and,
// if it is 100 Continue, sends body and reads the final answer (past any
// other informational one). It
// returns whether the server said 100 Continue, and the final response
// with its body.
func expectContinue(t *testing.T, url, head, body string) (bool, *http.Response, string) {
	t.Helper()
	c := dialRaw(t, url)
	if _, err := io.WriteString(c, head+"\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	continued := res.StatusCode == http.StatusContinue
	if continued {
		if _, err := io.WriteString(c, body); err != nil {
			t.Fatal(err)
		}
		// The final answer, after any other 1xx: without a key the
		// upstream's own 100 Continue is passed on as well, before or
		// after the body was sent (HTTP allows several).
		for res.StatusCode >= 100 && res.StatusCode <= 199 {
			if res, err = http.ReadResponse(br, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	return continued, res, bodyOf(t, res)
}

// bodyEcho is an upstream that answers with the body it got and its
// Expect header, counting the requests.
func bodyEcho(t *testing.T, runs *atomic.Int32) *httptest.Server {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "expect=%q body=%s", r.Header.Get("Expect"), b)
	}))
	t.Cleanup(up.Close)
	return up
}

// A client that sends Expect: 100-continue gets its 100 Continue and its
// body reaches the upstream, for a protected request with a key (whose
// body the proxy has read, so the upstream is not asked for a 100 of its
// own) and for a request without one (the Expect passed on).
func TestProxyExpectContinue(t *testing.T) {
	var runs atomic.Int32
	p := serveProxy(t, bodyEcho(t, &runs).URL, idemhttp.ProxyConfig{})
	for _, c := range []struct{ name, key, want string }{
		{"key", "Idempotency-Key: expect-", `expect="" body={"a":1}`},
		{"no key", "", `expect="100-continue" body={"a":1}`},
	} {
		for _, framing := range []string{"Content-Length: 7", "Transfer-Encoding: chunked"} {
			body := `{"a":1}`
			if strings.HasPrefix(framing, "Transfer") {
				body = "7\r\n" + body + "\r\n0\r\n\r\n"
			}
			head := "POST /x HTTP/1.1\r\nHost: client.example\r\nContent-Type: application/json\r\n" + framing
			if c.key != "" {
				head += "\r\n" + c.key + framing[:1]
			}
			before := runs.Load()
			continued, res, got := expectContinue(t, p.URL, head, body)
			if !continued || res.StatusCode != 200 || got != c.want {
				t.Errorf("%s, %s: continued %t, %d %q; want 100 Continue, then 200 %q", c.name, framing, continued, res.StatusCode, got, c.want)
			}
			if runs.Load() != before+1 {
				t.Errorf("%s, %s: the upstream ran %d times, want 1", c.name, framing, runs.Load()-before)
			}
		}
	}
}

// A request with a key whose body is larger than MaxBody is refused with
// 413 and never reaches the upstream: at once, without a 100 Continue,
// when its Content-Length says so; once MaxBody+1 bytes have come, when
// it is chunked. Nothing is recorded: the same key then runs a request
// within the limit.
func TestProxyBodyOverMaxBodyNeverReachesUpstream(t *testing.T) {
	var runs atomic.Int32
	p := serveProxy(t, bodyEcho(t, &runs).URL, idemhttp.ProxyConfig{Middleware: idemhttp.Config{MaxBody: 8}})
	big := `{"a":"12345678"}`
	head := "POST /x HTTP/1.1\r\nHost: client.example\r\nContent-Type: application/json\r\nIdempotency-Key: big-1\r\n"
	continued, res, body := expectContinue(t, p.URL, head+fmt.Sprintf("Content-Length: %d", len(big)), big)
	if continued || res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("Content-Length over MaxBody: continued %t, %d %q; want 413 without 100 Continue", continued, res.StatusCode, body)
	}
	chunked := fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(big), big)
	continued, res, body = expectContinue(t, p.URL, head+"Transfer-Encoding: chunked", chunked)
	if !continued || res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("chunked over MaxBody: continued %t, %d %q; want 100 Continue, then 413", continued, res.StatusCode, body)
	}
	res, body = rawRequest(t, p.URL, head+fmt.Sprintf("Content-Length: %d", len(big)), big)
	if res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("Content-Length over MaxBody, no Expect: %d %q; want 413", res.StatusCode, body)
	}
	if n := runs.Load(); n != 0 {
		t.Fatalf("the upstream ran %d times for bodies over MaxBody", n)
	}
	res, body = rawRequest(t, p.URL, head+"Content-Length: 7", `{"a":1}`)
	if res.StatusCode != 200 || body != `expect="" body={"a":1}` || res.Header.Get("Idempotent-Replayed") != "" {
		t.Errorf("then within MaxBody: %d %q replayed=%q; want it run", res.StatusCode, body, res.Header.Get("Idempotent-Replayed"))
	}
}
