package idemhttp_test

import (
	"bufio"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/store/memstore"
)

// silentUpgrade is an upstream that answers every request with 101 and
// then says nothing, keeping the connection open until the test ends. It
// sends on eof when a connection's client half-closed it (the proxy passed
// the client's CloseWrite on).
func silentUpgrade(t *testing.T) (addr string, eof <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan struct{}, 10)
	conns := make(chan net.Conn, 10)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns <- c
			go func() {
				br := bufio.NewReader(c)
				if _, err := http.ReadRequest(br); err != nil {
					return
				}
				_, _ = io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: tcp\r\nConnection: Upgrade\r\n\r\n")
				if _, err := io.Copy(io.Discard, br); err == nil {
					got <- struct{}{} // half-closed; the connection stays open
				}
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		for {
			select {
			case c := <-conns:
				_ = c.Close()
			default:
				return
			}
		}
	})
	return "http://" + ln.Addr().String(), got
}

// An upgraded connection passed through for a protected request ends when
// the client's connection is closed (as a server's shutdown closes the
// connections handlers took over), even after the client half-closed it
// and while the upstream keeps its side open and silent: the handler
// returns and releases its key.
func TestProxyUpgradeEndsWhenTheClientConnectionCloses(t *testing.T) {
	up, eof := silentUpgrade(t)
	store, _ := memstore.New(memstore.Config{})
	events := make(chan idemhttp.Event, 1)
	u, _ := url.Parse(up)
	h, err := idemhttp.NewProxy(idemhttp.ProxyConfig{Upstream: u, ErrorLog: log.New(io.Discard, "", 0),
		Middleware: idemhttp.Config{Store: store, OnEvent: func(e idemhttp.Event) { events <- e }}})
	if err != nil {
		t.Fatal(err)
	}
	hijacked := make(chan net.Conn, 1)
	p := httptest.NewUnstartedServer(h)
	p.Config.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateHijacked {
			hijacked <- c
		}
	}
	p.Start()
	defer p.Close()

	c, _ := upgradeThrough(t, p.URL, "POST /attach HTTP/1.1\r\nHost: x\r\nIdempotency-Key: half-1\r\nContent-Length: 0\r\nUpgrade: tcp\r\nConnection: Upgrade\r\n\r\n")
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-eof:
	case <-time.After(10 * time.Second):
		t.Fatal("the client's half-close did not reach the upstream")
	}
	select {
	case e := <-events:
		t.Fatalf("the exchange ended (%s) before its connection was closed", e.Outcome)
	default:
	}
	(<-hijacked).Close() // as a shutdown closes the connections taken over
	select {
	case e := <-events:
		if e.Status != http.StatusSwitchingProtocols || e.Outcome != idemhttp.OutcomeReleased {
			t.Errorf("event: status %d, outcome %s; want 101, released", e.Status, e.Outcome)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the handler did not return after its client's connection was closed: the key stays reserved")
	}
}

// upgradeThrough sends request, an upgrade, on a connection of its own to
// the proxy at proxyURL and fails t unless the proxy answers 101. The
// connection, closed when the test ends, gives up after 10 s; the reader
// holds what followed the 101.
func upgradeThrough(t *testing.T, proxyURL, request string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(proxyURL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = io.WriteString(c, request)
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil || res.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade through the proxy: %v, %v", res, err)
	}
	return c, br
}
