package idemhttp_test

import (
	"bufio"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem/idemhttp"
)

// A request passed through unrecorded (no key) whose body breaks on the
// client's side, here a malformed chunk, is the client's mistake: 400
// body-unreadable, not a 502 blaming the upstream, which was reached.
func TestProxyClientBodyThatBreaksIs400(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			return // the proxy's request to us broke off
		}
		w.WriteHeader(http.StatusCreated)
	}))
	defer up.Close()
	p := newProxy(t, up.URL, 10*time.Second)
	p.Config.ErrorLog = log.New(io.Discard, "", 0)

	c, err := net.Dial("tcp", strings.TrimPrefix(p.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "POST /things HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\n")
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), idemhttp.ProblemBodyUnreadable) {
		t.Fatalf("a malformed chunk: %d %s; want 400 %s", res.StatusCode, b, idemhttp.ProblemBodyUnreadable)
	}
}
