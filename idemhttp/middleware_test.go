package idemhttp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/idemtest"
	"github.com/idemgo/idem/internal/pgtest"
	"github.com/idemgo/idem/store/memstore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(pgtest.Wrap(m)) }

// upstream is a counting handler standing in for the protected API.
type upstream struct {
	n       atomic.Int32
	status  int
	header  http.Header
	body    string
	hold    chan struct{} // when set, requests wait on it
	started chan struct{} // when set, receives once per request as it starts
	// holdFirst, when set, holds the first run alone.
	holdFirst chan struct{}
}

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := u.n.Add(1)
	if u.started != nil {
		u.started <- struct{}{}
	}
	if u.hold != nil {
		<-u.hold
	}
	if u.holdFirst != nil && n == 1 {
		<-u.holdFirst
	}
	for k, v := range u.header {
		w.Header()[k] = v
	}
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/json")
	}
	status := u.status
	if status == 0 {
		status = http.StatusCreated
	}
	w.WriteHeader(status)
	body := u.body
	if body == "" {
		b, _ := io.ReadAll(r.Body)
		body = `{"run":` + strconv.Itoa(int(n)) + `,"echo":` + strconv.Quote(string(b)) + `}`
	}
	_, _ = io.WriteString(w, body)
}

type bundle struct {
	store  *memstore.Store
	clock  *idemtest.Clock
	up     *upstream
	h      http.Handler
	events chan idemhttp.Event
}

func setup(t *testing.T, cfg idemhttp.Config) *bundle {
	t.Helper()
	clock := idemtest.NewClock()
	s, err := memstore.New(memstore.Config{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	b := &bundle{store: s, clock: clock, up: &upstream{}, events: make(chan idemhttp.Event, 1000)}
	if cfg.Store == nil {
		cfg.Store = s
	}
	cfg.OnEvent = func(e idemhttp.Event) { b.events <- e }
	mw, err := idemhttp.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b.h = mw(b.up)
	return b
}

type reqOpt func(*http.Request)

func header(k, v string) reqOpt { return func(r *http.Request) { r.Header.Add(k, v) } }

func (b *bundle) do(t *testing.T, method, target, body string, opts ...reqOpt) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, target, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	for _, o := range opts {
		o(r)
	}
	w := httptest.NewRecorder()
	b.h.ServeHTTP(w, r)
	return w
}

func key(v string) reqOpt { return header("Idempotency-Key", v) }

func wantProblem(t *testing.T, w *httptest.ResponseRecorder, status int, typ string) {
	t.Helper()
	wantErrorAnswer(t, w, status, "application/problem+json")
	if n := w.Header().Get("X-Content-Type-Options"); n != "nosniff" {
		t.Errorf("X-Content-Type-Options = %q, want nosniff", n)
	}
	var p idemhttp.Problem
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatalf("problem body %q: %v", w.Body, err)
	}
	if p.Type != typ || p.Status != status || p.Title == "" {
		t.Errorf("problem = %+v, want type %s status %d", p, typ, status)
	}
}

func (b *bundle) runs() int { return int(b.up.n.Load()) }

func wantRuns(t *testing.T, b *bundle, n int) {
	t.Helper()
	if got := b.runs(); got != n {
		t.Fatalf("upstream ran %d times, want %d", got, n)
	}
}

func TestH1SFStringAndRawAreOneKey(t *testing.T) {
	b := setup(t, idemhttp.Config{})
	w1 := b.do(t, "POST", "/charges", `{"a":1}`, key(`"k1"`))
	w2 := b.do(t, "POST", "/charges", `{"a":1}`, key(`k1`))
	if w1.Code != 201 || w2.Code != 201 || w1.Body.String() != w2.Body.String() {
		t.Fatalf("responses %d %q / %d %q", w1.Code, w1.Body, w2.Code, w2.Body)
	}
	if w2.Header().Get("Idempotent-Replayed") != "true" || w1.Header().Get("Idempotent-Replayed") != "" {
		t.Errorf("replayed headers: first %q, retry %q", w1.Header().Get("Idempotent-Replayed"), w2.Header().Get("Idempotent-Replayed"))
	}
	wantRuns(t, b, 1)
}

func TestH2MissingKey(t *testing.T) {
	t.Run("required", func(t *testing.T) {
		b := setup(t, idemhttp.Config{RequireKey: true})
		wantProblem(t, b.do(t, "POST", "/charges", `{}`), 400, idemhttp.ProblemKeyMissing)
		wantRuns(t, b, 0)
	})
	t.Run("optional", func(t *testing.T) {
		b := setup(t, idemhttp.Config{})
		for range 2 {
			if w := b.do(t, "POST", "/charges", `{}`); w.Code != 201 || w.Header().Get("Idempotent-Replayed") != "" {
				t.Fatalf("status %d", w.Code)
			}
		}
		wantRuns(t, b, 2)
	})
}

func TestH3InvalidKeys(t *testing.T) {
	b := setup(t, idemhttp.Config{})
	k255 := strings.Repeat("k", 255)
	for name, opts := range map[string][]reqOpt{
		"empty":             {key("")},
		"blank":             {key("   ")},
		"256 bytes":         {key(k255 + "k")},
		"control character": {key("a\x01b")},
		"two header lines":  {key("a"), key("b")},
		"malformed sf":      {key(`"abc`)},
		"empty sf":          {key(`""`)},
	} {
		t.Run(name, func(t *testing.T) {
			wantProblem(t, b.do(t, "POST", "/charges", `{}`, opts...), 400, idemhttp.ProblemKeyInvalid)
		})
	}
	wantRuns(t, b, 0)
	if w := b.do(t, "POST", "/charges", `{}`, key(k255)); w.Code != 201 {
		t.Errorf("a 255-byte key got %d", w.Code)
	}
	b.do(t, "POST", "/charges", `{}`, key("Case"))
	if w := b.do(t, "POST", "/charges", `{}`, key("case")); w.Header().Get("Idempotent-Replayed") != "" {
		t.Error("keys are not case-sensitive")
	}
	wantRuns(t, b, 3)
}

func TestH4MethodsPassThrough(t *testing.T) {
	b := setup(t, idemhttp.Config{})
	for _, m := range []string{"GET", "HEAD", "OPTIONS", "PUT", "DELETE"} {
		for range 2 {
			w := b.do(t, m, "/x", ``, key("same"))
			if w.Header().Get("Idempotent-Replayed") != "" {
				t.Errorf("%s replayed", m)
			}
		}
	}
	wantRuns(t, b, 10)
	for _, m := range []string{"PATCH", "post"} {
		b.do(t, m, "/y", `{}`, key("k-"+m))
		if w := b.do(t, m, "/y", `{}`, key("k-"+m)); w.Header().Get("Idempotent-Replayed") != "true" {
			t.Errorf("%s is not protected", m)
		}
	}
	wantRuns(t, b, 12)
}

func TestH5ReplayIsExact(t *testing.T) {
	b := setup(t, idemhttp.Config{})
	b.up.header = http.Header{
		"Location":         {"/charges/ch_1"},
		"Content-Type":     {"application/vnd.api+json; charset=utf-8"},
		"Content-Encoding": {"identity"},
		"X-Internal":       {"not allowlisted"},
	}
	first := b.do(t, "POST", "/charges", `{"a":1}`, key("k5"))
	for i := range 10 {
		w := b.do(t, "POST", "/charges", `{"a":1}`, key("k5"))
		if w.Code != 201 || !bytes.Equal(w.Body.Bytes(), first.Body.Bytes()) {
			t.Fatalf("retry %d: %d %q, want 201 %q", i, w.Code, w.Body, first.Body)
		}
		for _, h := range []string{"Location", "Content-Type", "Content-Encoding"} {
			if w.Header().Get(h) != first.Header().Get(h) {
				t.Errorf("retry %d: %s = %q, want %q", i, h, w.Header().Get(h), first.Header().Get(h))
			}
		}
		if w.Header().Get("X-Internal") != "" {
			t.Error("a header outside the allowlist was replayed")
		}
		if w.Header().Get("Idempotent-Replayed") != "true" {
			t.Error("no Idempotent-Replayed: true")
		}
	}
	wantRuns(t, b, 1)
}

func TestH6SensitiveHeadersNeverReplayed(t *testing.T) {
	b := setup(t, idemhttp.Config{})
	b.up.header = http.Header{
		"Set-Cookie":       {"session=secret"},
		"Authorization":    {"Bearer leaked"},
		"Www-Authenticate": {"Basic"},
		"Connection":       {"close"},
	}
	b.do(t, "POST", "/x", `{}`, key("k6"))
	w := b.do(t, "POST", "/x", `{}`, key("k6"))
	for _, h := range []string{"Set-Cookie", "Authorization", "Www-Authenticate", "Connection"} {
		if w.Header().Get(h) != "" {
			t.Errorf("%s replayed: %q", h, w.Header().Get(h))
		}
	}
	if w.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatal("not a replay")
	}
}

// TestReplayHeadersRefusesNeverReplayed: a ReplayHeaders naming a header
// that is never recorded is a configuration mistake New reports, rather
// than a list silently not followed.
func TestReplayHeadersRefusesNeverReplayed(t *testing.T) {
	s, err := memstore.New(memstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"Set-Cookie", "set-cookie", "Set-Cookie2", "Authorization", "Proxy-Authorization",
		"WWW-Authenticate", "Proxy-Authenticate", "Connection", "Keep-Alive", "TE", "Trailer", "Transfer-Encoding",
		"Upgrade", "Proxy-Connection", "Content-Length", "Idempotent-Replayed"} {
		_, err := idemhttp.New(idemhttp.Config{Store: s, ReplayHeaders: append(slices.Clone(idemhttp.DefaultReplayHeaders), name)})
		if err == nil || !strings.Contains(err.Error(), "Config.ReplayHeaders") || !strings.Contains(err.Error(), strconv.Quote(name)) {
			t.Errorf("ReplayHeaders with %q: New = %v, want an error naming the field and the header", name, err)
		}
	}
	if _, err := idemhttp.New(idemhttp.Config{Store: s, ReplayHeaders: []string{"x-request-id", "X-Cookie-Hint"}}); err != nil {
		t.Errorf("ReplayHeaders of ordinary headers: %v", err)
	}
}

func TestH7JSONCanonicalComparison(t *testing.T) {
	b := setup(t, idemhttp.Config{})
	b.do(t, "POST", "/x", `{"a":1,"b":[1,2]}`, key("k7"))
	if w := b.do(t, "POST", "/x", "{ \"b\" : [1,2],\n \"a\":1 }", key("k7")); w.Header().Get("Idempotent-Replayed") != "true" {
		t.Errorf("reordered members: %d, want a replay", w.Code)
	}
	wantProblem(t, b.do(t, "POST", "/x", `{"a":1,"b":[2,1]}`, key("k7")), 422, idemhttp.ProblemKeyReused)
	wantRuns(t, b, 1)
}

// Numbers count by their exact value: another integer beyond 2^53, which
// RFC 8785 would write as the same double, is another request (422), while
// another spelling of the same value is a retry.
func TestH7NumbersByExactValue(t *testing.T) {
	b := setup(t, idemhttp.Config{})
	b.do(t, "POST", "/x", `{"account":9007199254740993,"amount":100}`, key("k7n"))
	wantProblem(t, b.do(t, "POST", "/x", `{"account":9007199254740992,"amount":100}`, key("k7n")), 422, idemhttp.ProblemKeyReused)
	if w := b.do(t, "POST", "/x", `{"amount":1e2,"account":9007199254740993.0}`, key("k7n")); w.Header().Get("Idempotent-Replayed") != "true" {
		t.Errorf("same values spelled differently: %d, want a replay", w.Code)
	}
	wantRuns(t, b, 1)
}

func TestH8MismatchLeavesRecord(t *testing.T) {
	b := setup(t, idemhttp.Config{})
	b.up.body = `{"secret":"original-response"}`
	b.do(t, "POST", "/x?q=1", `{"card":"4242"}`, key("k8"))
	for name, w := range map[string]*httptest.ResponseRecorder{
		"body":   b.do(t, "POST", "/x?q=1", `{"card":"0000"}`, key("k8")),
		"path":   b.do(t, "POST", "/y?q=1", `{"card":"4242"}`, key("k8")),
		"query":  b.do(t, "POST", "/x?q=2", `{"card":"4242"}`, key("k8")),
		"method": b.do(t, "PATCH", "/x?q=1", `{"card":"4242"}`, key("k8")),
	} {
		t.Run(name, func(t *testing.T) {
			wantProblem(t, w, 422, idemhttp.ProblemKeyReused)
			if s := w.Body.String(); strings.Contains(s, "4242") || strings.Contains(s, "original-response") {
				t.Errorf("problem leaks the original: %s", s)
			}
		})
	}
	wantRuns(t, b, 1)
	if w := b.do(t, "POST", "/x?q=1", `{"card":"4242"}`, key("k8")); w.Header().Get("Idempotent-Replayed") != "true" || w.Body.String() != `{"secret":"original-response"}` {
		t.Errorf("original no longer replays: %d %s", w.Code, w.Body)
	}
}

func TestH9H10InFlight(t *testing.T) {
	b := setup(t, idemhttp.Config{})
	b.up.hold = make(chan struct{})
	b.up.started = make(chan struct{}, 1)
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- b.do(t, "POST", "/x", `{"a":1}`, key("k9")) }()
	<-b.up.started
	// H9: another body while the original runs is a mismatch, not 409.
	wantProblem(t, b.do(t, "POST", "/x", `{"a":2}`, key("k9")), 422, idemhttp.ProblemKeyReused)
	// H10: the same request is 409 with Retry-After >= 1.
	w := b.do(t, "POST", "/x", `{"a":1}`, key("k9"))
	wantProblem(t, w, 409, idemhttp.ProblemInProgress)
	if ra, err := strconv.Atoi(w.Header().Get("Retry-After")); err != nil || ra < 1 {
		t.Errorf("Retry-After = %q, want >= 1 s", w.Header().Get("Retry-After"))
	}
	close(b.up.hold)
	first := <-done
	if first.Code != 201 {
		t.Fatalf("original = %d", first.Code)
	}
	if w := b.do(t, "POST", "/x", `{"a":1}`, key("k9")); w.Header().Get("Idempotent-Replayed") != "true" || w.Body.String() != first.Body.String() {
		t.Errorf("after completion: %d %s, want the replay", w.Code, w.Body)
	}
	wantRuns(t, b, 1)
}

func TestH10FiftyConcurrent(t *testing.T) {
	b := setup(t, idemhttp.Config{})
	// The run that wins holds until every other request has been answered,
	// so that all fifty overlap it.
	b.up.hold = make(chan struct{})
	release := sync.OnceFunc(func() { close(b.up.hold) })
	defer release() // a failed check does not leave the run held
	b.up.started = make(chan struct{}, 50)
	answers := make(chan *httptest.ResponseRecorder, 50)
	start := make(chan struct{})
	for range 50 {
		go func() {
			<-start
			answers <- b.do(t, "POST", "/x", `{"a":1}`, key("k10"))
		}()
	}
	close(start)
	for range 49 {
		wantProblem(t, <-answers, 409, idemhttp.ProblemInProgress)
	}
	release()
	if w := <-answers; w.Code != 201 || w.Header().Get("Idempotent-Replayed") != "" {
		t.Errorf("the one run: %d (replayed %q), want 201 from the handler", w.Code, w.Header().Get("Idempotent-Replayed"))
	}
	wantRuns(t, b, 1)
	if w := b.do(t, "POST", "/x", `{"a":1}`, key("k10")); w.Header().Get("Idempotent-Replayed") != "true" {
		t.Errorf("a retry after the run: %d, not a replay", w.Code)
	}
	wantRuns(t, b, 1)
}

func TestH11RejectedRequestKeepsReservation(t *testing.T) {
	b := setup(t, idemhttp.Config{})
	b.up.hold = make(chan struct{})
	b.up.started = make(chan struct{}, 1)
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- b.do(t, "POST", "/x", `{"a":1}`, key("k11")) }()
	<-b.up.started
	wantProblem(t, b.do(t, "POST", "/x", `{"a":1}`, key("k11")), 409, idemhttp.ProblemInProgress)
	wantProblem(t, b.do(t, "POST", "/x", `{"a":2}`, key("k11")), 422, idemhttp.ProblemKeyReused)
	k, _ := idem.ParseKey(idemhttp.DefaultNamespace, "k11")
	rec, err := b.store.Get(context.Background(), k)
	if err != nil || rec.Status != idem.StatusInProgress {
		t.Fatalf("reservation after rejected requests: %+v %v", rec, err)
	}
	close(b.up.hold)
	<-done
	if w := b.do(t, "POST", "/x", `{"a":1}`, key("k11")); w.Header().Get("Idempotent-Replayed") != "true" {
		t.Errorf("owner's result was not recorded")
	}
	wantRuns(t, b, 1)
}

func TestH12StoredStatuses(t *testing.T) {
	for _, tc := range []struct {
		profile idemhttp.Profile
		status  int
		stored  bool
	}{
		{idemhttp.ProfileIETF, 200, true},
		{idemhttp.ProfileIETF, 201, true},
		{idemhttp.ProfileIETF, 302, true},
		{idemhttp.ProfileIETF, 400, true},
		{idemhttp.ProfileIETF, 404, true},
		{idemhttp.ProfileIETF, 408, false},
		{idemhttp.ProfileIETF, 409, false},
		{idemhttp.ProfileIETF, 425, false},
		{idemhttp.ProfileIETF, 429, false},
		{idemhttp.ProfileIETF, 500, false},
		{idemhttp.ProfileIETF, 503, false},
		{idemhttp.ProfileStripe, 500, true},
		{idemhttp.ProfileStripe, 429, false},
		{idemhttp.ProfileStripe, 400, true},
	} {
		t.Run(strconv.Itoa(int(tc.profile))+"/"+strconv.Itoa(tc.status), func(t *testing.T) {
			b := setup(t, idemhttp.Config{Profile: tc.profile})
			b.up.status = tc.status
			b.do(t, "POST", "/x", `{}`, key("k12"))
			w := b.do(t, "POST", "/x", `{}`, key("k12"))
			if replayed := w.Header().Get("Idempotent-Replayed") == "true"; replayed != tc.stored {
				t.Fatalf("replayed = %v, want %v", replayed, tc.stored)
			}
			if w.Code != tc.status {
				t.Errorf("status %d, want %d", w.Code, tc.status)
			}
			want := 1
			if !tc.stored {
				want = 2
			}
			wantRuns(t, b, want)
		})
	}
	b := setup(t, idemhttp.Config{Profile: idemhttp.ProfileStripe})
	b.do(t, "POST", "/x", `{"a":1}`, key("k"))
	wantStripeError(t, b.do(t, "POST", "/x", `{"a":2}`, key("k")), 400, "idempotency_error")
}

func TestH14RetentionExpiry(t *testing.T) {
	b := setup(t, idemhttp.Config{Retention: time.Hour})
	b.do(t, "POST", "/x", `{}`, key("k14"))
	b.clock.Advance(time.Hour - time.Second)
	if w := b.do(t, "POST", "/x", `{}`, key("k14")); w.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatal("not replayed within the retention")
	}
	b.clock.Advance(time.Second)
	if w := b.do(t, "POST", "/x", `{}`, key("k14")); w.Header().Get("Idempotent-Replayed") != "" {
		t.Fatal("replayed after the retention")
	}
	wantRuns(t, b, 2)
}

func TestH15LeaseTakeover(t *testing.T) {
	b := setup(t, idemhttp.Config{Lease: 5 * time.Second})
	b.up.holdFirst = make(chan struct{})
	b.up.started = make(chan struct{}, 2)
	first := make(chan *httptest.ResponseRecorder)
	go func() { first <- b.do(t, "POST", "/x", `{}`, key("k15")) }()
	<-b.up.started
	b.clock.Advance(6 * time.Second) // the owner's lease lapsed (it hangs)
	// The taker-over runs and records its own answer while the stale owner
	// still hangs.
	w2 := b.do(t, "POST", "/x", `{}`, key("k15"))
	<-b.up.started
	if w2.Code != 201 || !strings.Contains(w2.Body.String(), `"run":2`) {
		t.Fatalf("taker-over: %d %s, want 201 from run 2", w2.Code, w2.Body)
	}
	// The stale owner finishes last: its client gets its own answer, and
	// its late result does not overwrite the record.
	close(b.up.holdFirst)
	w1 := <-first
	if w1.Code != 201 || !strings.Contains(w1.Body.String(), `"run":1`) {
		t.Fatalf("stale owner: %d %s, want 201 from run 1", w1.Code, w1.Body)
	}
	wantRuns(t, b, 2)
	k, _ := idem.ParseKey(idemhttp.DefaultNamespace, "k15")
	rec, err := b.store.Get(context.Background(), k)
	if err != nil || rec.Status != idem.StatusCommitted || rec.Fence != 2 {
		t.Fatalf("record = %+v %v, want committed by the taker-over (fence 2)", rec, err)
	}
	w3 := b.do(t, "POST", "/x", `{}`, key("k15"))
	if w3.Header().Get("Idempotent-Replayed") != "true" || w3.Body.String() != w2.Body.String() {
		t.Errorf("replay %q (replayed %q), want the taker-over's %q", w3.Body, w3.Header().Get("Idempotent-Replayed"), w2.Body)
	}
	wantRuns(t, b, 2)
}

func TestH17ScopesAreIndependent(t *testing.T) {
	b := setup(t, idemhttp.Config{})
	b.up.hold = make(chan struct{})
	b.up.started = make(chan struct{}, 2)
	done := make(chan *httptest.ResponseRecorder, 2)
	go func() { done <- b.do(t, "POST", "/x", `{"a":1}`, key("k17"), header("Authorization", "Bearer alice")) }()
	<-b.up.started
	// Bob uses the same key while Alice's request runs, with another body:
	// neither 409 nor 422.
	go func() { done <- b.do(t, "POST", "/x", `{"a":2}`, key("k17"), header("Authorization", "Bearer bob")) }()
	<-b.up.started
	close(b.up.hold)
	for range 2 {
		if w := <-done; w.Code != 201 {
			t.Fatalf("status %d", w.Code)
		}
	}
	wa := b.do(t, "POST", "/x", `{"a":1}`, key("k17"), header("Authorization", "Bearer alice"))
	wb := b.do(t, "POST", "/x", `{"a":2}`, key("k17"), header("Authorization", "Bearer bob"))
	if wa.Header().Get("Idempotent-Replayed") != "true" || wb.Header().Get("Idempotent-Replayed") != "true" || !strings.Contains(wa.Body.String(), `\"a\":1`) || !strings.Contains(wb.Body.String(), `\"a\":2`) {
		t.Errorf("replays: alice %s, bob %s", wa.Body, wb.Body)
	}
	wantRuns(t, b, 2)
}

// failingStore is an idem.Store whose backend is down.
type failingStore struct{ idem.Store }

func (failingStore) Begin(context.Context, idem.Key, idem.Request, *idem.BeginOpts) (idem.Outcome, error) {
	return idem.Outcome{}, idem.Unavailable(errors.New("connection refused"))
}

func TestH18StoreUnavailable(t *testing.T) {
	b := setup(t, idemhttp.Config{Store: failingStore{}})
	w := b.do(t, "POST", "/x", `{}`, key("k18"))
	wantProblem(t, w, 503, idemhttp.ProblemStoreUnavailable)
	wantRuns(t, b, 0)
	open := setup(t, idemhttp.Config{Store: failingStore{}, FailOpen: true})
	if w := open.do(t, "POST", "/x", `{}`, key("k18")); w.Code != 201 {
		t.Errorf("fail-open: %d", w.Code)
	}
	wantRuns(t, open, 1)
}

func TestH19Limits(t *testing.T) {
	b := setup(t, idemhttp.Config{MaxBody: 1024, MaxCapture: 64})
	wantProblem(t, b.do(t, "POST", "/x", strings.Repeat("x", 1025), key("big")), 413, idemhttp.ProblemBodyTooLarge)
	wantRuns(t, b, 0)
	k, _ := idem.ParseKey(idemhttp.DefaultNamespace, "big")
	if _, err := b.store.Get(context.Background(), k); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("413 left a record: %v", err)
	}
	// 1024 bytes is accepted; a response over the capture cap is delivered
	// whole but not stored.
	body := strings.Repeat("y", 1024)
	w := b.do(t, "POST", "/x", body, key("k19"))
	if w.Code != 201 || !strings.Contains(w.Body.String(), body) {
		t.Fatalf("large response: %d, %d bytes", w.Code, w.Body.Len())
	}
	if w := b.do(t, "POST", "/x", body, key("k19")); w.Header().Get("Idempotent-Replayed") != "" {
		t.Error("a response over the capture cap was stored")
	}
	wantRuns(t, b, 2)
}

func TestH19StreamingNotStored(t *testing.T) {
	clock := idemtest.NewClock()
	s, _ := memstore.New(memstore.Config{Now: clock.Now})
	var runs atomic.Int32
	h := idemhttp.Middleware(idemhttp.Config{Store: s})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: 1\n\n")
		w.(http.Flusher).Flush()
		_, _ = io.WriteString(w, "data: 2\n\n")
	}))
	for range 2 {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("POST", "/events", nil)
		r.Header.Set("Idempotency-Key", "s1")
		h.ServeHTTP(w, r)
		if w.Body.String() != "data: 1\n\ndata: 2\n\n" || !w.Flushed {
			t.Fatalf("stream delivered %q flushed=%v", w.Body, w.Flushed)
		}
	}
	if runs.Load() != 2 {
		t.Errorf("runs = %d, want 2 (streams are not stored)", runs.Load())
	}
}

// TestStreamSeesFlushFailures checks that a streaming handler learns from
// http.ResponseController.Flush that its client has gone: its context,
// detached from the client's, does not tell it, so without the error it
// would stream on, its key held, for as long as it has something to send.
func TestStreamSeesFlushFailures(t *testing.T) {
	s, _ := memstore.New(memstore.Config{})
	for _, withKey := range []bool{true, false} {
		stopped := make(chan error, 1)
		h := idemhttp.Middleware(idemhttp.Config{Store: s})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			rc := http.NewResponseController(w)
			for i := 0; i < 500; i++ {
				_, _ = io.WriteString(w, "data: x\n\n") // the error is looked for in Flush's
				if err := rc.Flush(); err != nil {
					stopped <- err
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
			stopped <- nil
		}))
		srv := httptest.NewServer(h)
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		req := "POST /events HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n"
		if withKey {
			req += "Idempotency-Key: stream-1\r\n"
		}
		_, _ = io.WriteString(c, req+"\r\n")
		if _, err := c.Read(make([]byte, 64)); err != nil { // the stream has started
			t.Fatal(err)
		}
		_ = c.(*net.TCPConn).SetLinger(0) // reset: the server's next writes fail
		_ = c.Close()
		if err := <-stopped; err == nil {
			t.Errorf("key %v: the handler streamed 5 s to a client gone without a Flush error", withKey)
		}
		srv.Close()
	}
}

func TestPanicReleasesKey(t *testing.T) {
	s, _ := memstore.New(memstore.Config{})
	var runs atomic.Int32
	h := idemhttp.Middleware(idemhttp.Config{Store: s})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if runs.Add(1) == 1 {
			panic("boom")
		}
		w.WriteHeader(201)
	}))
	serve := func() (code int, panicked any) {
		defer func() { panicked = recover() }()
		w := httptest.NewRecorder()
		r := httptest.NewRequest("POST", "/x", nil)
		r.Header.Set("Idempotency-Key", "p1")
		h.ServeHTTP(w, r)
		return w.Code, nil
	}
	if _, p := serve(); p != "boom" {
		t.Fatalf("panic = %v, want it re-raised", p)
	}
	if code, p := serve(); p != nil || code != 201 {
		t.Fatalf("retry after a panic: %d %v", code, p)
	}
}

// H21: the client's cancellation does not reach the handler; its result is
// recorded and the retry replays.
func TestH21ClientDisconnectDoesNotCancel(t *testing.T) {
	b := setup(t, idemhttp.Config{})
	type ctxKey struct{}
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "v"))
	var sawCancel, sawValue atomic.Bool
	mw, _ := idemhttp.New(idemhttp.Config{Store: b.store})
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cancel() // the client goes away mid-request
		time.Sleep(10 * time.Millisecond)
		sawCancel.Store(r.Context().Err() != nil || r.Context().Done() == nil)
		sawValue.Store(r.Context().Value(ctxKey{}) == "v")
		w.WriteHeader(201)
		_, _ = io.WriteString(w, `{"done":true}`)
	}))
	r := httptest.NewRequest("POST", "/x", strings.NewReader(`{}`)).WithContext(ctx)
	r.Header.Set("Idempotency-Key", "k21")
	h.ServeHTTP(httptest.NewRecorder(), r)
	if sawCancel.Load() {
		t.Fatal("the handler's context was cancelled with the client's, or cannot be cancelled at all")
	}
	if !sawValue.Load() {
		t.Error("the handler's context lost the request context's values")
	}
	r2 := httptest.NewRequest("POST", "/x", strings.NewReader(`{}`))
	r2.Header.Set("Idempotency-Key", "k21")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r2)
	if w.Header().Get("Idempotent-Replayed") != "true" || w.Body.String() != `{"done":true}` {
		t.Errorf("retry after disconnect: %d %s", w.Code, w.Body)
	}
}

func TestEvents(t *testing.T) {
	b := setup(t, idemhttp.Config{})
	b.do(t, "POST", "/x", `{}`, key("e"))
	b.do(t, "POST", "/x", `{}`, key("e"))
	b.do(t, "POST", "/x", `{"other":1}`, key("e"))
	b.do(t, "POST", "/x", `{}`)
	b.do(t, "GET", "/x", ``, key("e"))
	var got []idemhttp.Outcome
	for len(b.events) > 0 {
		got = append(got, (<-b.events).Outcome)
	}
	want := []idemhttp.Outcome{idemhttp.OutcomeExecuted, idemhttp.OutcomeReplayed, idemhttp.OutcomeMismatch, idemhttp.OutcomePassThrough}
	if strings.Join(outcomes(got), ",") != strings.Join(outcomes(want), ",") {
		t.Errorf("events %v, want %v", got, want)
	}
}

func outcomes(o []idemhttp.Outcome) []string {
	s := make([]string, len(o))
	for i, x := range o {
		s[i] = string(x)
	}
	return s
}

func TestConfigValidation(t *testing.T) {
	s, _ := memstore.New(memstore.Config{})
	for name, cfg := range map[string]idemhttp.Config{
		"no store":         {},
		"bad namespace":    {Store: s, Namespace: "Bad"},
		"negative body":    {Store: s, MaxBody: -1},
		"negative capture": {Store: s, MaxCapture: -1},
		"bad method":       {Store: s, Methods: []string{"PO ST"}},
		"bad profile":      {Store: s, Profile: 7},
	} {
		if _, err := idemhttp.New(cfg); err == nil || !strings.HasPrefix(err.Error(), "idemhttp: Config.") {
			t.Errorf("%s: New = %v, want an error naming the field", name, err)
		}
	}
}

// TestHandlerCanReadTheBodyAgain: the body the middleware read is the
// handler's to read, and GetBody, which net/http's client and
// ReverseProxy use to resend it, gives it again from the start, whether the
// handler runs protected or, with FailOpen and the store down, unprotected.
func TestHandlerCanReadTheBodyAgain(t *testing.T) {
	const body = `{"amount":100}`
	for name, cfg := range map[string]idemhttp.Config{
		"protected": {},
		"fail-open": {Store: failingStore{}, FailOpen: true},
	} {
		t.Run(name, func(t *testing.T) {
			b := setup(t, cfg)
			var reads []string
			b.h = idemhttp.Middleware(withStore(cfg, b))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				first, _ := io.ReadAll(r.Body)
				reads = append(reads, string(first))
				if r.GetBody == nil {
					t.Error("GetBody is nil")
					return
				}
				for range 2 {
					rc, err := r.GetBody()
					if err != nil {
						t.Fatal(err)
					}
					again, _ := io.ReadAll(rc)
					_ = rc.Close()
					reads = append(reads, string(again))
				}
				w.WriteHeader(http.StatusCreated)
			}))
			if w := b.do(t, "POST", "/x", body, key("again")); w.Code != http.StatusCreated {
				t.Fatalf("status %d", w.Code)
			}
			if want := []string{body, body, body}; !slices.Equal(reads, want) {
				t.Errorf("reads %q, want %q", reads, want)
			}
		})
	}
}

// withStore is cfg on b's store unless cfg names its own.
func withStore(cfg idemhttp.Config, b *bundle) idemhttp.Config {
	if cfg.Store == nil {
		cfg.Store = b.store
	}
	return cfg
}

// MaxBody may be as large as an int64 goes ("no practical limit"); bodies
// of unknown length still reach the handler whole, and an announced length
// is no reason to allocate before the bytes come.
func TestMaxBodyAtTheInt64Limit(t *testing.T) {
	b := setup(t, idemhttp.Config{MaxBody: math.MaxInt64})
	for _, length := range []int64{-1, 1 << 40} {
		r := httptest.NewRequest("POST", "/x", io.NopCloser(strings.NewReader(`{"amount":100}`)))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Idempotency-Key", "max-"+strconv.FormatInt(length, 10))
		r.ContentLength = length
		w := httptest.NewRecorder()
		b.h.ServeHTTP(w, r)
		if length < 0 && (w.Code != 201 || !strings.Contains(w.Body.String(), `"echo":"{\"amount\":100}"`)) {
			t.Fatalf("chunked body: %d %s, want the body echoed", w.Code, w.Body)
		}
		if length > 0 && w.Code != 400 {
			t.Fatalf("body shorter than its Content-Length: %d %s, want 400", w.Code, w.Body)
		}
	}
}

// A custom KeyScope or Fingerprint that fails answers 500 without its
// error text, counted as OutcomeInternal with the error in the event, and
// never reaches the store (nor, with FailOpen, the handler).
// leaselessStore is a store whose Begin answers Fresh without a lease, as
// a store of one's own (or a wrapper around one) that drops it would.
type leaselessStore struct{ *memstore.Store }

func (s leaselessStore) Begin(ctx context.Context, k idem.Key, req idem.Request, opts *idem.BeginOpts) (idem.Outcome, error) {
	o, err := s.Store.Begin(ctx, k, req, opts)
	o.Lease = idem.Lease{}
	return o, err
}

// TestFreshWithoutLeaseIsAStoreFailure checks that a store answering Fresh
// without a lease, under which the handler cannot run as the key's owner,
// is answered as a failing store is (503, or passed through with
// FailOpen), not with an empty 200 for a request that never ran.
func TestFreshWithoutLeaseIsAStoreFailure(t *testing.T) {
	s, _ := memstore.New(memstore.Config{})
	b := setup(t, idemhttp.Config{Store: leaselessStore{s}})
	w := b.do(t, "POST", "/x", `{}`, key("no-lease"))
	wantProblem(t, w, 503, idemhttp.ProblemStoreUnavailable)
	if e := <-b.events; e.Outcome != idemhttp.OutcomeStoreError || e.Err == nil || e.Status != 503 {
		t.Errorf("event %+v, want OutcomeStoreError, 503, with the error", e)
	}
	wantRuns(t, b, 0)
	open := setup(t, idemhttp.Config{Store: leaselessStore{s}, FailOpen: true})
	if w := open.do(t, "POST", "/x", `{}`, key("no-lease-open")); w.Code != 201 {
		t.Errorf("fail-open: %d %s", w.Code, w.Body)
	}
	wantRuns(t, open, 1)
}

// TestFingerprintReadingTheBodyLeavesItToTheHandler checks that a
// Config.Fingerprint that reads r.Body (rather than its body argument), as
// one written for a plain handler would, leaves the handler the whole body
// all the same, and a retry replays.
func TestFingerprintReadingTheBodyLeavesItToTheHandler(t *testing.T) {
	b := setup(t, idemhttp.Config{Fingerprint: func(r *http.Request, _ []byte) (idem.Fingerprint, error) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return idem.Fingerprint{}, err
		}
		return idem.FingerprintRequest(idem.RequestParts{Method: r.Method, Target: r.URL.RequestURI(), Body: body})
	}})
	for i := range 2 {
		w := b.do(t, "POST", "/x", `{"a":1}`, key("fp-reads"))
		if w.Code != 201 || w.Body.String() != `{"run":1,"echo":"{\"a\":1}"}` {
			t.Fatalf("try %d: %d %s, want the handler to have read the body", i+1, w.Code, w.Body)
		}
	}
	wantRuns(t, b, 1)
}

func TestConfigFunctionsThatFail(t *testing.T) {
	for name, cfg := range map[string]idemhttp.Config{
		"fingerprint error": {Fingerprint: func(*http.Request, []byte) (idem.Fingerprint, error) {
			return idem.Fingerprint{}, errors.New("secret internal detail")
		}},
		"zero fingerprint": {FailOpen: true, Fingerprint: func(*http.Request, []byte) (idem.Fingerprint, error) {
			return idem.Fingerprint{}, nil
		}},
		"invalid scope": {KeyScope: func(*http.Request) string { return "secret\x01scope" }},
	} {
		t.Run(name, func(t *testing.T) {
			b := setup(t, cfg)
			w := b.do(t, "POST", "/x", `{}`, key("k"))
			wantProblem(t, w, 500, idemhttp.ProblemInternal)
			if strings.Contains(w.Body.String(), "secret") {
				t.Errorf("the problem shows the error: %s", w.Body)
			}
			if e := <-b.events; e.Outcome != idemhttp.OutcomeInternal || e.Err == nil {
				t.Errorf("event %+v, want OutcomeInternal with the error", e)
			}
			wantRuns(t, b, 0)
		})
	}
}

// Unrecorded keeps a protected response from being recorded: it is
// delivered, and the key released, so the retry runs again.
func TestUnrecorded(t *testing.T) {
	s, _ := memstore.New(memstore.Config{})
	runs := 0
	mw, err := idemhttp.New(idemhttp.Config{Store: s})
	if err != nil {
		t.Fatal(err)
	}
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs++
		w.WriteHeader(http.StatusCreated)
		if runs == 1 {
			idemhttp.Unrecorded(w)
		}
	}))
	for i, wantReplay := range []bool{false, false, true} {
		r := httptest.NewRequest("POST", "/x", strings.NewReader(`{}`))
		r.Header.Set("Idempotency-Key", "unrecorded")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != 201 || (w.Header().Get("Idempotent-Replayed") == "true") != wantReplay {
			t.Fatalf("request %d: %d replayed=%q, want 201 replayed=%v", i, w.Code, w.Header().Get("Idempotent-Replayed"), wantReplay)
		}
	}
	if runs != 2 {
		t.Errorf("the handler ran %d times, want 2", runs)
	}
	idemhttp.Unrecorded(httptest.NewRecorder()) // not the middleware's: nothing happens
}

// A 206 is replayed with its Content-Range.
// Header values that are not UTF-8 (a Latin-1 file name, say) replay
// byte for byte, beside valid ones of the same and other fields.
func TestReplayKeepsHeaderBytes(t *testing.T) {
	b := setup(t, idemhttp.Config{})
	b.up.header = http.Header{
		"Content-Disposition": {"attachment; filename=\"caf\xe9.pdf\""},
		"Link":                {"</a>; rel=a", "</\xff>; rel=b"},
		"Location":            {"/files/1"},
	}
	first := b.do(t, "POST", "/files", `{}`, key("latin1"))
	w := b.do(t, "POST", "/files", `{}`, key("latin1"))
	if w.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatal("not replayed")
	}
	for _, h := range []string{"Content-Disposition", "Link", "Location", "Content-Type"} {
		if d := cmp.Diff(first.Header()[h], w.Header()[h]); d != "" {
			t.Errorf("%s (-first +replay):\n%s", h, d)
		}
	}
	wantRuns(t, b, 1)
}

func TestPartialContentReplaysItsRange(t *testing.T) {
	s, _ := memstore.New(memstore.Config{})
	mw, err := idemhttp.New(idemhttp.Config{Store: s})
	if err != nil {
		t.Fatal(err)
	}
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Range", "bytes 0-4/20")
		w.WriteHeader(http.StatusPartialContent)
		_, _ = io.WriteString(w, "01234")
	}))
	for i := range 2 {
		r := httptest.NewRequest("POST", "/file", strings.NewReader(`{}`))
		r.Header.Set("Idempotency-Key", "range")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != 206 || w.Header().Get("Content-Range") != "bytes 0-4/20" {
			t.Fatalf("request %d: %d Content-Range %q", i, w.Code, w.Header().Get("Content-Range"))
		}
	}
}

// A body limit set before the middleware (http.MaxBytesReader) answers
// 413, as the middleware's own limit does.
func TestOuterBodyLimitIs413(t *testing.T) {
	b := setup(t, idemhttp.Config{})
	h := http.MaxBytesHandler(b.h, 1024)
	r := httptest.NewRequest("POST", "/x", io.NopCloser(strings.NewReader(strings.Repeat("x", 4096))))
	r.ContentLength = -1
	r.Header.Set("Idempotency-Key", "limited")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	wantProblem(t, w, http.StatusRequestEntityTooLarge, idemhttp.ProblemBodyTooLarge)
	wantRuns(t, b, 0)
}

// A recorded 405 replays its Allow header, which RFC 9110 requires of it.
func TestMethodNotAllowedReplaysAllow(t *testing.T) {
	s, _ := memstore.New(memstore.Config{})
	mw, err := idemhttp.New(idemhttp.Config{Store: s})
	if err != nil {
		t.Fatal(err)
	}
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", "GET, HEAD")
		w.WriteHeader(http.StatusMethodNotAllowed)
	}))
	for i := range 2 {
		r := httptest.NewRequest("POST", "/report", strings.NewReader(`{}`))
		r.Header.Set("Idempotency-Key", "allow")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != 405 || w.Header().Get("Allow") != "GET, HEAD" {
			t.Fatalf("request %d: %d Allow %q, want 405 and GET, HEAD", i, w.Code, w.Header().Get("Allow"))
		}
		if replayed := w.Header().Get(idemhttp.ReplayedHeader) == "true"; replayed != (i == 1) {
			t.Fatalf("request %d: replayed %v", i, replayed)
		}
	}
}

// A response whose body is shorter or longer than the Content-Length the
// handler declared reached the client broken (net/http cuts the connection
// after it): it is not recorded, and the retry runs again instead of being
// answered the wrong body as if it were whole. A body of the declared
// length, or none where the status or method has none, is recorded.
func TestDeclaredContentLengthMismatchNotRecorded(t *testing.T) {
	for _, c := range []struct {
		name, method, length, body string
		status                     int
		recorded                   bool
	}{
		{"shorter", "POST", "10", "12345", 201, false},
		{"longer", "POST", "3", "12345", 201, false},
		{"none written", "POST", "4", "", 0, false},
		{"exact", "POST", "5", "12345", 201, true},
		{"exact, implicit 200", "POST", "5", "12345", 0, true},
		{"not a number", "POST", "x", "12345", 201, true},
		{"304 keeps the representation's length", "POST", "100", "", 304, true},
		{"HEAD", "HEAD", "100", "", 200, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, _ := memstore.New(memstore.Config{})
			mw, err := idemhttp.New(idemhttp.Config{Store: s, Methods: []string{"POST", "HEAD"}})
			if err != nil {
				t.Fatal(err)
			}
			runs := 0
			h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				runs++
				w.Header().Set("Content-Length", c.length)
				if c.status != 0 {
					w.WriteHeader(c.status)
				}
				_, _ = io.WriteString(w, c.body)
			}))
			for range 2 {
				r := httptest.NewRequest(c.method, "/x", strings.NewReader(`{}`))
				r.Header.Set("Idempotency-Key", "length")
				h.ServeHTTP(httptest.NewRecorder(), r)
			}
			if want := map[bool]int{true: 1, false: 2}[c.recorded]; runs != want {
				t.Errorf("Content-Length %s, %d bytes written: the handler ran %d times, want %d", c.length, len(c.body), runs, want)
			}
		})
	}
}

// errReader fails every read, as a body does whose client went away
// mid-upload or sent a malformed chunk.
type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }

// A body that cannot be read is the client's fault, told apart from a
// key error and from the server's own failures: 400 body-unreadable,
// outcome body_unreadable, nothing run or recorded.
func TestUnreadableBodyIs400(t *testing.T) {
	b := setup(t, idemhttp.Config{})
	for range 2 {
		r := httptest.NewRequest("POST", "/x", io.NopCloser(errReader{}))
		r.ContentLength = -1
		r.Header.Set("Idempotency-Key", "unreadable")
		w := httptest.NewRecorder()
		b.h.ServeHTTP(w, r)
		wantProblem(t, w, http.StatusBadRequest, idemhttp.ProblemBodyUnreadable)
		if e := <-b.events; e.Outcome != idemhttp.OutcomeBodyUnreadable || e.Status != http.StatusBadRequest {
			t.Errorf("event: outcome %s, status %d; want body_unreadable, 400", e.Outcome, e.Status)
		}
	}
	wantRuns(t, b, 0)
}

// Headers a middleware outside this one set before the handler ran are
// that middleware's, set again (or not) for each request, replays
// included: they are recorded only when the handler changed them.
func TestOuterHeadersRecordedOnlyWhenChanged(t *testing.T) {
	b := setup(t, idemhttp.Config{})
	b.up.header = http.Header{"Vary": {"Accept"}, "Content-Language": {"en"}}
	inner := b.h
	b.h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			w.Header().Set("Content-Encoding", "gzip") // as a compressor labels the response before the handler
			w.Header().Set("X-Request-Id", "first")
			w.Header().Set("Content-Language", "en")
			w.Header().Set("Vary", "Accept-Encoding")
		}
		inner.ServeHTTP(w, r)
	})
	if w := b.do(t, "POST", "/x", `{}`, key("k"), header("Accept-Encoding", "gzip")); w.Code != 201 || w.Header().Get("Content-Encoding") != "gzip" {
		t.Fatalf("first: %d %v", w.Code, w.Header())
	}
	retry := b.do(t, "POST", "/x", `{}`, key("k"))
	if retry.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry not replayed: %d %v", retry.Code, retry.Header())
	}
	if ce, rid := retry.Header().Get("Content-Encoding"), retry.Header().Get("X-Request-Id"); ce != "" || rid != "" {
		t.Errorf("replayed Content-Encoding %q, X-Request-Id %q, set outside for the first request only", ce, rid)
	}
	// Headers the handler set, even to the values they had, are its own.
	if v := retry.Header().Values("Vary"); len(v) != 1 || v[0] != "Accept" {
		t.Errorf("Vary = %q, want the handler's [Accept]", v)
	}
	if v := retry.Header().Values("Content-Language"); len(v) != 1 || v[0] != "en" {
		t.Errorf("Content-Language = %q, want the handler's [en]", v)
	}
}
