package main_test

// End-to-end tests of what the proxy stores when the upstream fails or the
// client goes away (statements H13 and H21).

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestH13UpstreamBackRunsRetry: while the upstream is unreachable the proxy
// answers 502 and stores nothing, so once the upstream is back the retry
// runs it (N=1) and a further retry replays.
func TestH13UpstreamBackRunsRetry(t *testing.T) {
	addr := freeAddr(t)
	p := startProxy(t, "--upstream", "http://"+addr, "--store", sqliteDSN(t))
	for range 2 {
		if r := send(t, p.base, "back-1", `{"a":1}`); r.status != http.StatusBadGateway {
			t.Fatalf("upstream down: got %d %s, want 502", r.status, r.body)
		}
	}

	up := newCounting(t)
	up.srv.Close() // the counting handler, served on the address the proxy knows
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("the upstream's address was taken meanwhile: %v", err)
	}
	srv := &http.Server{Handler: up.srv.Config.Handler, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	first := send(t, p.base, "back-1", `{"a":1}`)
	if first.status != http.StatusCreated || first.replayed {
		t.Fatalf("retry with the upstream back: %+v", first)
	}
	again := send(t, p.base, "back-1", `{"a":1}`)
	if again.status != http.StatusCreated || !again.replayed || again.body != first.body {
		t.Fatalf("second retry: %+v, want a replay of %q", again, first.body)
	}
	if n := up.runs("back-1"); n != 1 {
		t.Fatalf("upstream ran %d times, want 1", n)
	}
}

// TestH13UpstreamTimeoutRunsRetry: an upstream slower than --timeout gives
// 504 and nothing is stored, so the retry runs the upstream again.
func TestH13UpstreamTimeoutRunsRetry(t *testing.T) {
	up := newCounting(t)
	up.block = make(chan struct{})
	p := startProxy(t, "--upstream", up.srv.URL, "--store", sqliteDSN(t), "--timeout", "300ms")
	if r := send(t, p.base, "slow-1", `{}`); r.status != http.StatusGatewayTimeout {
		t.Fatalf("slow upstream: got %d %s, want 504", r.status, r.body)
	}
	close(up.block) // the upstream answers at once from now on
	r := sendUntilDone(t, p.base, "slow-1", `{}`)
	if r.status != http.StatusCreated || r.replayed {
		t.Fatalf("retry after the timeout: %+v, want a fresh 201", r)
	}
	if n := up.runs("slow-1"); n != 2 {
		t.Fatalf("upstream ran %d times, want 2 (the timed-out run and the retry)", n)
	}
}

// TestH21ClientGoneProxy: a client that disconnects while the proxy waits
// for the upstream does not cancel that call; its result is stored and the
// client's retry replays it (N=1).
func TestH21ClientGoneProxy(t *testing.T) {
	up := newCounting(t)
	up.block = make(chan struct{})
	up.started = make(chan struct{}, 1)
	p := startProxy(t, "--upstream", up.srv.URL, "--store", sqliteDSN(t))

	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.base+"/charges", strings.NewReader(`{"amount":5}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "gone-1")
	done := make(chan error, 1)
	go func() {
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			res.Body.Close()
		}
		done <- err
	}()
	select {
	case <-up.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream never saw the request")
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("client: %v, want its own cancellation", err)
	}
	// Let the proxy notice the closed connection before the upstream answers.
	time.Sleep(100 * time.Millisecond)
	close(up.block)

	r := sendUntilDone(t, p.base, "gone-1", `{"amount":5}`)
	if r.status != http.StatusCreated || !r.replayed {
		t.Fatalf("retry after the client left: %+v, want a replayed 201", r)
	}
	if n := up.runs("gone-1"); n != 1 {
		t.Fatalf("upstream ran %d times, want 1", n)
	}
}
