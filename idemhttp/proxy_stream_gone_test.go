package idemhttp_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem/idemhttp"
)

// A response the proxy streams through for a protected request, not
// recorded (an event stream, a body over MaxCapture), ends when its client
// goes away, even while the upstream keeps it open and sends nothing more:
// the handler returns and releases its key, rather than holding it for as
// long as the upstream stays silent.
func TestProxyStreamEndsWhenItsClientGoes(t *testing.T) {
	for name, answer := range map[string]func(w http.ResponseWriter){
		"event stream": func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = fmt.Fprint(w, "data: one\n\n")
		},
		"over MaxCapture": func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/plain")
			_, _ = fmt.Fprint(w, strings.Repeat("x", 2048))
		},
	} {
		t.Run(name, func(t *testing.T) {
			release := make(chan struct{})
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				answer(w)
				_ = http.NewResponseController(w).Flush()
				<-release // silent, the response open
			}))
			defer up.Close()
			defer close(release)
			events := make(chan idemhttp.Event, 1)
			p := serveProxy(t, up.URL, idemhttp.ProxyConfig{Middleware: idemhttp.Config{MaxCapture: 1024,
				OnEvent: func(e idemhttp.Event) { events <- e }}})
			c, err := net.Dial("tcp", strings.TrimPrefix(p.URL, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			fmt.Fprintf(c, "POST /events HTTP/1.1\r\nHost: x\r\nIdempotency-Key: gone-%d\r\nContent-Length: 0\r\n\r\n", len(name))
			res, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil || res.StatusCode != http.StatusOK {
				t.Fatalf("through the proxy: %v, %v", res, err)
			}
			_ = c.Close() // the client goes away
			select {
			case e := <-events:
				if e.Outcome != idemhttp.OutcomeReleased {
					t.Errorf("outcome %s, want released", e.Outcome)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the handler did not return after its client went away: the key stays reserved")
			}
		})
	}
}
