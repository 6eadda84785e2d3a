package idemhttp_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// rawUpstream answers every request on a connection of its own with the
// bytes of answer, then closes the connection; it counts the requests.
func rawUpstream(t *testing.T, answer string) (url string, runs *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	runs = new(atomic.Int32)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			r, err := http.ReadRequest(bufio.NewReader(c))
			if err == nil {
				_, _ = io.Copy(io.Discard, r.Body)
				runs.Add(1)
				_, _ = io.WriteString(c, answer)
			}
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); <-done })
	return "http://" + ln.Addr().String(), runs
}

// A response body the upstream framed and cut short is an upstream
// failure: 502, nothing recorded, and the retry runs again.
func TestProxyBodyCutShortIsNotRecorded(t *testing.T) {
	for name, answer := range map[string]string{
		"Content-Length": "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"id\":",
		"chunked":        "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n6\r\n{\"id\":\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			up, runs := rawUpstream(t, answer)
			p := newProxy(t, up, 5*time.Second)
			for i := 1; i <= 2; i++ {
				res, body := post(t, p.URL+"/charges", "cut-"+name, `{}`)
				if res.StatusCode != http.StatusBadGateway || res.Header.Get("Idempotent-Replayed") != "" {
					t.Fatalf("attempt %d: %d replayed=%q %s, want 502", i, res.StatusCode, res.Header.Get("Idempotent-Replayed"), body)
				}
			}
			if n := runs.Load(); n != 2 {
				t.Errorf("the upstream ran %d times, want 2 (the retry runs again)", n)
			}
		})
	}
}

// A body the upstream ends by closing its connection, with no framing,
// cannot be told from one cut short: it is recorded as received.
func TestProxyCloseDelimitedBodyIsRecorded(t *testing.T) {
	up, runs := rawUpstream(t, "HTTP/1.0 201 Created\r\nContent-Type: application/json\r\n\r\n{\"id\":1}")
	p := newProxy(t, up, 5*time.Second)
	res1, b1 := post(t, p.URL+"/charges", "close-1", `{}`)
	res2, b2 := post(t, p.URL+"/charges", "close-1", `{}`)
	if res1.StatusCode != 201 || res2.StatusCode != 201 || b1 != `{"id":1}` || b2 != b1 {
		t.Fatalf("answers %d %q and %d %q, want 201 {\"id\":1} twice", res1.StatusCode, b1, res2.StatusCode, b2)
	}
	if res2.Header.Get("Idempotent-Replayed") != "true" || runs.Load() != 1 {
		t.Errorf("retry replayed=%q, upstream ran %d times; want a replay of one run", res2.Header.Get("Idempotent-Replayed"), runs.Load())
	}
}
