package idemhttp_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgo/idem/idemhttp"
)

// The proxy buffers and records the responses of protected requests only;
// everything else goes through as ReverseProxy forwards it.

func TestProxyStripeProfileDoesNotRecordUpstreamFailures(t *testing.T) {
	up := httptest.NewServer(http.NotFoundHandler())
	addr := up.URL
	up.Close() // nothing listens there any more
	p := serveProxy(t, addr, idemhttp.ProxyConfig{Timeout: time.Second, Middleware: idemhttp.Config{Profile: idemhttp.ProfileStripe}})
	for i := range 2 {
		res, body := post(t, p.URL+"/x", "down-stripe", `{}`)
		if res.StatusCode != 502 || res.Header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("request %d: %d replayed=%q %s; the proxy's own 502 must not be recorded", i, res.StatusCode, res.Header.Get("Idempotent-Replayed"), body)
		}
	}
}

func TestProxyRecordsResponseWithTrailers(t *testing.T) {
	var runs atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Trailer", "X-Checksum")
		w.WriteHeader(201)
		_, _ = io.WriteString(w, `{"id":1}`)
		w.Header().Set("X-Checksum", "abc")
	}))
	defer up.Close()
	p := newProxy(t, up.URL, 5*time.Second)
	res1, body1 := post(t, p.URL+"/things", "trailer-1", `{}`)
	if res1.StatusCode != 201 || body1 != `{"id":1}` || res1.Trailer.Get("X-Checksum") != "abc" {
		t.Fatalf("first: %d %q trailer %v, want 201 with the trailer passed on", res1.StatusCode, body1, res1.Trailer)
	}
	res2, body2 := post(t, p.URL+"/things", "trailer-1", `{}`)
	if res2.StatusCode != 201 || body2 != body1 || res2.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry: %d %q replayed=%q, want the recorded 201", res2.StatusCode, body2, res2.Header.Get("Idempotent-Replayed"))
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("upstream ran %d times, want 1", n)
	}
}

// A client that goes away before a large response is written does not
// free the key: the proxy's failed write is not the upstream's failure.
func TestProxyClientGoneBeforeLargeResponseIsRecorded(t *testing.T) {
	var runs atomic.Int32
	arrived, release := make(chan struct{}, 1), make(chan struct{})
	big := strings.Repeat("x", 1<<20)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if runs.Add(1) == 1 {
			arrived <- struct{}{}
			<-release
		}
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, big)
	}))
	defer up.Close()
	p := newProxy(t, up.URL, 10*time.Second)
	p.Config.ErrorLog = log.New(io.Discard, "", 0)

	c, err := net.Dial("tcp", strings.TrimPrefix(p.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "POST /things HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nIdempotency-Key: gone-1\r\nContent-Length: 2\r\n\r\n{}")
	<-arrived
	_ = c.(*net.TCPConn).SetLinger(0) // reset: the proxy's writes fail
	_ = c.Close()
	close(release)

	deadline := time.Now().Add(10 * time.Second)
	for {
		res, body := post(t, p.URL+"/things", "gone-1", `{}`)
		if res.StatusCode == http.StatusConflict && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond) // the first request still runs
			continue
		}
		if res.StatusCode != 200 || res.Header.Get("Idempotent-Replayed") != "true" || len(body) != len(big) {
			t.Fatalf("retry: %d replayed=%q, %d bytes; want the recorded response", res.StatusCode, res.Header.Get("Idempotent-Replayed"), len(body))
		}
		break
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("upstream ran %d times, want 1", n)
	}
}

func TestProxyPassesHEADThrough(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, strings.Repeat("a", 100)) // HEAD: Content-Length 100, no body
	}))
	defer up.Close()
	p := newProxy(t, up.URL, 5*time.Second)
	res, err := http.Head(p.URL + "/doc")
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != 200 || res.ContentLength != 100 {
		t.Fatalf("HEAD through the proxy: %d, Content-Length %d; want 200, 100", res.StatusCode, res.ContentLength)
	}
}

func TestProxyPassesUpgradesThrough(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		_ = brw.Flush()
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		line, _ := brw.ReadString('\n') // the client speaks first
		_, _ = brw.WriteString("echo " + line)
		_ = brw.Flush()
	}))
	defer up.Close()
	p := newProxy(t, up.URL, 5*time.Second)
	// The 101 comes before the client speaks.
	upgradeThrough(t, p.URL, "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
}

func TestProxyStreamsUnprotectedResponses(t *testing.T) {
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		_, _ = io.WriteString(w, "{\"n\":1}\n")
		_ = http.NewResponseController(w).Flush()
		<-release
		_, _ = io.WriteString(w, "{\"n\":2}\n")
	}))
	defer up.Close()
	defer close(release)
	p := newProxy(t, up.URL, 10*time.Second)
	res, err := http.Get(p.URL + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	first := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(res.Body).ReadString('\n')
		first <- line
	}()
	select {
	case line := <-first:
		if line != "{\"n\":1}\n" {
			t.Fatalf("first line %q", line)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the first line of a streamed GET was held back until the upstream finished")
	}
}

// An upstream that drops a reused connection after running a POST does not
// get it again from the proxy's Transport (which resends requests carrying
// an Idempotency-Key by itself): the proxy sends each request once.
func TestProxySendsAKeyedRequestOnce(t *testing.T) {
	for name, transport := range map[string]http.RoundTripper{"default": nil, "own": http.DefaultTransport.(*http.Transport).Clone()} {
		t.Run(name, func(t *testing.T) { testSendsOnce(t, transport) })
	}
}

func testSendsOnce(t *testing.T, transport http.RoundTripper) {
	var posts atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != "POST" {
			_, _ = io.WriteString(w, "ok")
			return
		}
		_, _ = io.ReadAll(r.Body)
		if posts.Add(1) == 1 {
			panic(http.ErrAbortHandler) // the work done, the connection dropped
		}
		w.WriteHeader(http.StatusCreated)
	}))
	up.Config.ErrorLog = log.New(io.Discard, "", 0)
	defer up.Close()
	p := serveProxy(t, up.URL, idemhttp.ProxyConfig{Transport: transport})
	res, err := http.Get(p.URL + "/warm") // a connection to reuse
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	_ = res.Body.Close()
	res, _ = post(t, p.URL+"/pay", "once", `{"a":1}`)
	if n := posts.Load(); n != 1 {
		t.Fatalf("the upstream got the POST %d times (answer %d), want once", n, res.StatusCode)
	}
}

// roundTripFunc is a RoundTripper made of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// A Transport of the user's own finds the key under the lower-case map
// key the doc names (hidden from net/http's resending); the upstream gets
// it either way.
func TestProxyOwnTransportSeesTheKey(t *testing.T) {
	var upstreamKey string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		upstreamKey = r.Header.Get("Idempotency-Key")
		w.WriteHeader(http.StatusCreated)
	}))
	defer up.Close()
	var seen string
	own := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		//lint:ignore SA1008 the proxy puts the key under this non-canonical map key on purpose (see ProxyConfig.Transport)
		if v := r.Header["idempotency-key"]; len(v) == 1 && r.Header.Get("Idempotency-Key") == "" {
			seen = v[0]
		}
		return http.DefaultTransport.RoundTrip(r)
	})
	p := serveProxy(t, up.URL, idemhttp.ProxyConfig{Transport: own})
	if res, _ := post(t, p.URL+"/x", "own-transport", `{}`); res.StatusCode != 201 || seen != "own-transport" || upstreamKey != "own-transport" {
		t.Fatalf("%d: the Transport saw key %q, the upstream %q", res.StatusCode, seen, upstreamKey)
	}
	// The default Transport: the upstream still gets the key.
	p2 := newProxy(t, up.URL, 5*time.Second)
	if res, _ := post(t, p2.URL+"/x", "default-transport", `{}`); res.StatusCode != 201 || upstreamKey != "default-transport" {
		t.Fatalf("%d: the upstream got key %q", res.StatusCode, upstreamKey)
	}
}

// A Transport of the user's own that answers by itself, leaving out what
// only net/http's Transport fills in (Response.Request, an empty Body), as
// http.Client allows of any RoundTripper, serves its answers: a keyed
// request's is recorded and replayed, a keyless one's and an empty one's
// delivered.
func TestProxyOwnTransportAnswering(t *testing.T) {
	var calls atomic.Int32
	own := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		n := calls.Add(1)
		if r.URL.Path == "/empty" {
			return &http.Response{StatusCode: http.StatusNoContent, Header: http.Header{}}, nil
		}
		body := fmt.Sprintf(`{"call":%d}`, n)
		res := &http.Response{StatusCode: http.StatusCreated, Header: http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body))}
		if r.URL.Path == "/detached" { // sent as another request, with a context of its own
			res.Request = r.Clone(context.Background())
		}
		return res, nil
	})
	p := serveProxy(t, "http://upstream.invalid", idemhttp.ProxyConfig{Transport: own})
	for i := range 2 {
		res, body := post(t, p.URL+"/x", "own-answer", `{}`)
		if res.StatusCode != http.StatusCreated || body != `{"call":1}` {
			t.Fatalf("try %d: %d %q, want 201 {\"call\":1}", i+1, res.StatusCode, body)
		}
	}
	if res, body := post(t, p.URL+"/x", "", `{}`); res.StatusCode != http.StatusCreated || body != `{"call":2}` {
		t.Fatalf("without a key: %d %q, want 201 {\"call\":2}", res.StatusCode, body)
	}
	if res, body := post(t, p.URL+"/empty", "own-empty", `{}`); res.StatusCode != http.StatusNoContent || body != "" {
		t.Fatalf("empty answer: %d %q, want 204", res.StatusCode, body)
	}
	for i := range 2 {
		if res, body := post(t, p.URL+"/detached", "own-detached", `{}`); res.StatusCode != http.StatusCreated || body != `{"call":4}` {
			t.Fatalf("answer to another request, try %d: %d %q, want 201 {\"call\":4}", i+1, res.StatusCode, body)
		}
	}
}
