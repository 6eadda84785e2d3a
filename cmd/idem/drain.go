package main

import (
	"context"
	"net"
	"net/http"
	"sync"
	"time"
)

// handlers tracks the handlers an http.Server runs, for a graceful
// shutdown that waits for all of them. http.Server.Shutdown waits for the
// connections the server serves, but not for those a handler took over
// (Hijack: in idem proxy, a protocol upgrade such as a WebSocket passing
// through), whose handler holds its request's key until it returns: a
// process that exits before leaves the key reserved until its lease ends.
type handlers struct {
	mu       sync.Mutex
	running  int               // handlers running
	hijacked map[net.Conn]bool // connections taken over by a running handler
	changed  chan struct{}     // closed, and replaced, when a handler returns while waited for
	waiting  bool              // someone waits on changed: only then does a handler close it
}

// connKey is the context key of the connection a request came on.
type connKey struct{}

// track makes srv serve h with its handlers tracked by the handlers it
// returns; it sets srv's Handler, ConnContext and ConnState.
func track(srv *http.Server, h http.Handler) *handlers {
	t := &handlers{hijacked: map[net.Conn]bool{}, changed: make(chan struct{})}
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		return context.WithValue(ctx, connKey{}, c)
	}
	// Called by Hijack, before it returns to the handler, so before the
	// handler returns and forgets the connection.
	srv.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateHijacked {
			t.mu.Lock()
			t.hijacked[c] = true
			t.mu.Unlock()
		}
	}
	srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.mu.Lock()
		t.running++
		t.mu.Unlock()
		defer func() { // also when h panics
			t.mu.Lock()
			defer t.mu.Unlock()
			t.running--
			if c, ok := r.Context().Value(connKey{}).(net.Conn); ok {
				delete(t.hijacked, c)
			}
			if t.waiting { // shutting down: not a channel per request
				close(t.changed)
				t.changed = make(chan struct{})
			}
		}()
		h.ServeHTTP(w, r)
	})
	return t
}

// inFlight is the number of handlers running.
func (t *handlers) inFlight() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.running
}

// wait waits until done holds, called with t.mu held, or ctx ends, and
// reports whether done holds.
func (t *handlers) wait(ctx context.Context, done func() bool) bool {
	for {
		t.mu.Lock()
		ok, changed := done(), t.changed
		t.waiting = true
		t.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return false
		}
	}
}

// drained is what shutdown left.
type drained struct {
	// closed is how many connections handlers had taken over were still
	// open at the end of the grace period, and were closed.
	closed int
	// cutOff says that requests were still running when shutdown
	// returned: their keys stay reserved until their leases end.
	cutOff bool
}

// shutdown stops srv, whose handlers t tracks, gracefully: it stops
// accepting connections and waits up to grace for the requests being
// served to finish, those on connections a handler took over included.
// Those connections still open then are closed, so that their handlers
// return and settle their keys, which they are given up to settle to do
// (the bound on the store call that settles a key). Other requests still
// running at the end of the grace period are left running (their
// connections open, their keys reserved): the upstream may still be at
// them, and releasing their keys would let a retry run them twice.
func shutdown(srv *http.Server, t *handlers, grace, settle time.Duration) drained {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	var d drained
	if err := srv.Shutdown(ctx); err != nil {
		d.cutOff = true // only ctx's error: Shutdown is called once
	}
	// Shutdown has returned once no connection it serves is left (or at
	// the end of the grace period): the handlers still running, if
	// any, are those of connections taken over.
	t.wait(ctx, func() bool { return t.running == 0 })
	t.mu.Lock()
	for c := range t.hijacked {
		_ = c.Close()
		d.closed++
	}
	t.mu.Unlock()
	sctx, scancel := context.WithTimeout(context.Background(), settle)
	defer scancel()
	if !t.wait(sctx, func() bool { return len(t.hijacked) == 0 }) {
		d.cutOff = true
	}
	return d
}
