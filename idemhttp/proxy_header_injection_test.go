package idemhttp_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/idemgo/idem/idemhttp"
)

// A header the upstream folds over two lines (obs-fold), the second
// reading as a header of its own, reaches the client on one line, the
// fold a space, first and in a replay: a recorded value never splits
// into headers the upstream did not send. A header whose name is
// malformed (a space in it) is not passed on.
func TestProxyUpstreamHeaderFoldsStayOneHeader(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, req.Body)
				head := "HTTP/1.1 201 Created\r\nLocation: /done\r\n Set-Cookie: stolen=1\r\nContent-Length: 2\r\nConnection: close\r\n\r\n"
				if req.URL.Path == "/badname" {
					head = "HTTP/1.1 201 Created\r\nX-Bad Name: 1\r\nContent-Length: 2\r\nConnection: close\r\n\r\n"
				}
				_, _ = io.WriteString(c, head+"ok")
			}()
		}
	}()
	p := serveProxy(t, "http://"+ln.Addr().String(), idemhttp.ProxyConfig{})
	for _, replayed := range []string{"", "true"} {
		res, body := rawRequest(t, p.URL, "POST /fold HTTP/1.1\r\nHost: h\r\nIdempotency-Key: fold\r\nContent-Length: 2", "{}")
		if res.StatusCode != 201 || body != "ok" || res.Header.Get("Idempotent-Replayed") != replayed {
			t.Fatalf("replayed %q: %d %q, Idempotent-Replayed %q", replayed, res.StatusCode, body, res.Header.Get("Idempotent-Replayed"))
		}
		if v := res.Header.Values("Location"); len(v) != 1 || v[0] != "/done Set-Cookie: stolen=1" || res.Header.Get("Set-Cookie") != "" {
			t.Errorf("replayed %q: Location %q, Set-Cookie %q; want the fold on one line, no Set-Cookie", replayed, v, res.Header.Get("Set-Cookie"))
		}
	}
	res, _ := rawRequest(t, p.URL, "POST /badname HTTP/1.1\r\nHost: h\r\nIdempotency-Key: badname\r\nContent-Length: 2", "{}")
	for name := range res.Header {
		if strings.ContainsAny(name, " \t") {
			t.Errorf("malformed header name: the client got %q", name)
		}
	}
}
