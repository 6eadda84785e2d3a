package idemhttp_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
)

// A request served in lease mode (Config.Store, the pool's store) on the
// key of a request served in transaction mode on the same store gets 409
// while that transaction is open, and once it committed is answered from
// its record: the handler runs once, and the replay is the response the
// first client got. (As when a deployment moves from one mode to the
// other, instances of both serving at once.)
func TestTxRecordReplayedInLeaseMode(t *testing.T) {
	e := newTxEnv(t)
	release, started := make(chan struct{}), make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	defer free() // a failing test does not leave the first request hanging
	runs := 0
	h := e.handler(idemhttp.Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs++
		close(started)
		<-release
		insert(http.StatusCreated).ServeHTTP(w, r)
	}))
	leaseMW, err := idemhttp.New(idemhttp.Config{Store: e.store})
	if err != nil {
		t.Fatal(err)
	}
	lease := leaseMW(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Error("the handler ran in lease mode")
		w.WriteHeader(http.StatusCreated)
	}))
	firstDone := make(chan string)
	go func() {
		w := postTx(h, "k-mixed", "clock")
		firstDone <- w.Result().Status + " " + w.Body.String()
	}()
	<-started
	if w := postTx(lease, "k-mixed", "clock"); w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), idemhttp.ProblemInProgress) {
		t.Errorf("lease mode while the transaction is open: %d %s; want 409 in progress", w.Code, w.Body)
	}
	free()
	var first string
	select {
	case first = <-firstDone:
	case <-time.After(20 * time.Second):
		t.Fatal("the first request did not end")
	}
	if !strings.HasPrefix(first, "201 ") {
		t.Fatalf("first: %s; want 201", first)
	}
	w := postTx(lease, "k-mixed", "clock")
	if got := w.Result().Status + " " + w.Body.String(); got != first || w.Header().Get(idemhttp.ReplayedHeader) != "true" || w.Header().Get("Content-Type") != "application/json" {
		t.Errorf("lease-mode replay: %s (%v); want %s replayed, with its Content-Type", got, w.Header(), first)
	}
	if n := e.rows("clock"); n != 1 || runs != 1 {
		t.Errorf("%d rows, %d runs; want 1 and 1", n, runs)
	}
	e.noTxLeft()
}

// A client that goes away while the handler runs in transaction mode
// neither cancels the handler's context nor its transaction: the handler's
// writes and the record commit together (OutcomeExecuted), and the retry
// with the key is answered from the record, without running again.
func TestTxClientGoneMidHandlerCommits(t *testing.T) {
	e := newTxEnv(t)
	release := make(chan struct{})
	clientCtx, firstServed := make(chan context.Context, 1), make(chan struct{})
	runs := 0
	inner := e.handler(idemhttp.Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs++
		<-release
		if err := r.Context().Err(); err != nil {
			t.Errorf("the handler's context ended with its client: %v", err)
		}
		insert(http.StatusCreated).ServeHTTP(w, r)
	}))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-First") != "" {
			defer close(firstServed)
			clientCtx <- r.Context()
		}
		inner.ServeHTTP(w, r)
	}))
	defer srv.Close()
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()

	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/orders", strings.NewReader("stool"))
	req.Header.Set(idem.HeaderName, "k-gone")
	req.Header.Set("X-First", "1")
	gone := make(chan error, 1)
	go func() {
		res, err := srv.Client().Do(req)
		if err == nil {
			res.Body.Close()
		}
		gone <- err
	}()
	served := <-clientCtx
	cancel()
	if err := <-gone; err == nil {
		t.Fatal("the cancelled request got a response")
	}
	<-served.Done() // the server saw the client go
	close(release)
	select {
	case <-firstServed:
	case <-time.After(20 * time.Second):
		t.Fatal("the first request did not end")
	}

	e.noTxLeft()
	if n := e.rows("stool"); n != 1 {
		t.Fatalf("%d rows, want the 1 the handler inserted", n)
	}
	if ev := e.lastEvent(); ev.Outcome != idemhttp.OutcomeExecuted || ev.Status != http.StatusCreated {
		t.Errorf("event %s %d %v; want executed 201", ev.Outcome, ev.Status, ev.Err)
	}
	req, _ = http.NewRequest(http.MethodPost, srv.URL+"/orders", strings.NewReader("stool"))
	req.Header.Set(idem.HeaderName, "k-gone")
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusCreated || res.Header.Get(idemhttp.ReplayedHeader) != "true" || !strings.Contains(string(body), `"sku":"stool"`) {
		t.Errorf("retry: %d %q %s; want the 201 replayed", res.StatusCode, res.Header.Get(idemhttp.ReplayedHeader), body)
	}
	if runs != 1 || e.rows("stool") != 1 {
		t.Errorf("%d runs, %d rows; want 1 and 1", runs, e.rows("stool"))
	}
}
