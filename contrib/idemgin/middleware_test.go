package idemgin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"go.uber.org/goleak"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/contrib/idemgin"
	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/idemtest"
	"github.com/idemgo/idem/store/memstore"
)

func TestMain(m *testing.M) {
	gin.SetMode(gin.TestMode)
	goleak.VerifyTestMain(m)
}

// upstream is a counting gin handler standing in for the protected API.
type upstream struct {
	n       atomic.Int32
	status  int
	header  http.Header
	body    string
	hold    chan struct{} // when set, requests wait on it
	started chan struct{} // when set, receives once per request as it starts
}

func (u *upstream) handle(c *gin.Context) {
	n := u.n.Add(1)
	if u.started != nil {
		u.started <- struct{}{}
	}
	if u.hold != nil {
		<-u.hold
	}
	for k, v := range u.header {
		for _, s := range v {
			c.Writer.Header().Add(k, s)
		}
	}
	status := u.status
	if status == 0 {
		status = http.StatusCreated
	}
	body := u.body
	if body == "" {
		b, _ := io.ReadAll(c.Request.Body)
		body = `{"run":` + strconv.Itoa(int(n)) + `,"echo":` + strconv.Quote(string(b)) + `}`
	}
	c.Data(status, "application/json", []byte(body))
}

type bundle struct {
	store  *memstore.Store
	clock  *idemtest.Clock
	up     *upstream
	engine *gin.Engine
	after  atomic.Int32 // runs of the handler registered after the middleware
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
	mw, err := idemgin.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b.engine = gin.New()
	b.engine.Use(mw, func(c *gin.Context) { b.after.Add(1) })
	b.engine.Any("/*path", b.up.handle)
	return b
}

type reqOpt func(*http.Request)

func header(k, v string) reqOpt { return func(r *http.Request) { r.Header.Add(k, v) } }

func key(v string) reqOpt { return header("Idempotency-Key", v) }

func serve(h http.Handler, method, target, body string, opts ...reqOpt) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, target, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	for _, o := range opts {
		o(r)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func (b *bundle) do(method, target, body string, opts ...reqOpt) *httptest.ResponseRecorder {
	return serve(b.engine, method, target, body, opts...)
}

func replayed(w *httptest.ResponseRecorder) bool {
	return w.Header().Get("Idempotent-Replayed") == "true"
}

func wantProblem(t *testing.T, w *httptest.ResponseRecorder, status int, typ string) {
	t.Helper()
	if w.Code != status {
		t.Fatalf("status = %d, want %d; body %s", w.Code, status, w.Body)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type = %q, want application/problem+json", ct)
	}
	var p idemhttp.Problem
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatalf("problem body %q: %v", w.Body, err)
	}
	if p.Type != typ || p.Status != status {
		t.Errorf("problem = %+v, want type %s status %d", p, typ, status)
	}
}

func wantRuns(t *testing.T, b *bundle, n int) {
	t.Helper()
	if got := int(b.up.n.Load()); got != n {
		t.Fatalf("handler ran %d times, want %d", got, n)
	}
	if got := int(b.after.Load()); got != n {
		t.Fatalf("the middleware after idemgin ran %d times, want %d", got, n)
	}
}

func TestH1SFStringAndRawAreOneKey(t *testing.T) {
	b := setup(t, idemhttp.Config{})
	w1 := b.do("POST", "/charges", `{"a":1}`, key(`"k1"`))
	w2 := b.do("POST", "/charges", `{"a":1}`, key(`k1`))
	if w1.Code != 201 || w2.Code != 201 || w1.Body.String() != w2.Body.String() {
		t.Fatalf("responses %d %q / %d %q", w1.Code, w1.Body, w2.Code, w2.Body)
	}
	if replayed(w1) || !replayed(w2) {
		t.Errorf("replayed: first %v, retry %v", replayed(w1), replayed(w2))
	}
	if w1.Body.String() != `{"run":1,"echo":"{\"a\":1}"}` {
		t.Errorf("the handler did not read the body: %s", w1.Body)
	}
	wantRuns(t, b, 1)
}

func TestH2MissingKey(t *testing.T) {
	t.Run("required", func(t *testing.T) {
		b := setup(t, idemhttp.Config{RequireKey: true})
		wantProblem(t, b.do("POST", "/charges", `{}`), 400, idemhttp.ProblemKeyMissing)
		wantRuns(t, b, 0)
	})
	t.Run("optional", func(t *testing.T) {
		b := setup(t, idemhttp.Config{})
		for range 2 {
			if w := b.do("POST", "/charges", `{}`); w.Code != 201 || replayed(w) {
				t.Fatalf("status %d, replayed %v", w.Code, replayed(w))
			}
		}
		wantRuns(t, b, 2)
	})
}

func TestH3InvalidKeys(t *testing.T) {
	b := setup(t, idemhttp.Config{})
	k255 := strings.Repeat("k", 255)
	for _, tc := range []struct {
		name string
		opts []reqOpt
	}{
		{"empty", []reqOpt{key("")}},
		{"blank", []reqOpt{key("   ")}},
		{"256 bytes", []reqOpt{key(k255 + "k")}},
		{"control character", []reqOpt{key("a\x01b")}},
		{"two header lines", []reqOpt{key("a"), key("b")}},
		{"malformed sf-string", []reqOpt{key(`"abc`)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantProblem(t, b.do("POST", "/charges", `{}`, tc.opts...), 400, idemhttp.ProblemKeyInvalid)
		})
	}
	wantRuns(t, b, 0)
	if w := b.do("POST", "/charges", `{}`, key(k255)); w.Code != 201 {
		t.Errorf("a 255-byte key got %d", w.Code)
	}
	b.do("POST", "/charges", `{}`, key("Case"))
	if w := b.do("POST", "/charges", `{}`, key("case")); replayed(w) {
		t.Error("keys are not case-sensitive")
	}
	wantRuns(t, b, 3)
}

func TestH4MethodsPassThrough(t *testing.T) {
	b := setup(t, idemhttp.Config{})
	for _, m := range []string{"GET", "HEAD", "OPTIONS", "PUT", "DELETE"} {
		for range 2 {
			if w := b.do(m, "/x", ``, key("same")); replayed(w) || w.Code != 201 {
				t.Errorf("%s: %d, replayed %v", m, w.Code, replayed(w))
			}
		}
	}
	wantRuns(t, b, 10)
	// gin routes upper-case methods only, so "post" never reaches a handler.
	b.do("PATCH", "/y", `{}`, key("k-patch"))
	if w := b.do("PATCH", "/y", `{}`, key("k-patch")); !replayed(w) {
		t.Error("PATCH is not protected")
	}
	wantRuns(t, b, 11)
}

func TestH5ReplayIsExact(t *testing.T) {
	b := setup(t, idemhttp.Config{})
	b.up.header = http.Header{
		"Location":   {"/charges/ch_1"},
		"X-Internal": {"not allowlisted"},
	}
	first := b.do("POST", "/charges", `{"a":1}`, key("k5"))
	if first.Code != 201 || first.Header().Get("X-Internal") == "" {
		t.Fatalf("first response %d %v", first.Code, first.Header())
	}
	for i := range 10 {
		w := b.do("POST", "/charges", `{"a":1}`, key("k5"))
		if w.Code != 201 || !bytes.Equal(w.Body.Bytes(), first.Body.Bytes()) || !replayed(w) {
			t.Fatalf("retry %d: %d %q replayed %v, want 201 %q", i, w.Code, w.Body, replayed(w), first.Body)
		}
		for _, h := range []string{"Location", "Content-Type"} {
			if w.Header().Get(h) != first.Header().Get(h) {
				t.Errorf("retry %d: %s = %q, want %q", i, h, w.Header().Get(h), first.Header().Get(h))
			}
		}
		if w.Header().Get("X-Internal") != "" {
			t.Error("a header outside the allowlist was replayed")
		}
	}
	wantRuns(t, b, 1)
}

func TestH6CookiesNeverReplayed(t *testing.T) {
	s, _ := memstore.New(memstore.Config{})
	mw, _ := idemgin.New(idemhttp.Config{Store: s})
	e := gin.New()
	e.POST("/x", mw, func(c *gin.Context) {
		c.SetCookie("session", "secret", 60, "/", "", true, true)
		c.JSON(201, gin.H{"ok": true})
	})
	if w := serve(e, "POST", "/x", `{}`, key("k6")); w.Header().Get("Set-Cookie") == "" {
		t.Fatal("the first response has no cookie")
	}
	w := serve(e, "POST", "/x", `{}`, key("k6"))
	if !replayed(w) || w.Header().Get("Set-Cookie") != "" {
		t.Errorf("replayed %v, Set-Cookie %q", replayed(w), w.Header().Get("Set-Cookie"))
	}
}

func TestH8MismatchLeavesRecord(t *testing.T) {
	b := setup(t, idemhttp.Config{})
	b.up.body = `{"secret":"original-response"}`
	b.do("POST", "/x?q=1", `{"card":"4242"}`, key("k8"))
	for name, w := range map[string]*httptest.ResponseRecorder{
		"body":   b.do("POST", "/x?q=1", `{"card":"0000"}`, key("k8")),
		"path":   b.do("POST", "/y?q=1", `{"card":"4242"}`, key("k8")),
		"query":  b.do("POST", "/x?q=2", `{"card":"4242"}`, key("k8")),
		"method": b.do("PATCH", "/x?q=1", `{"card":"4242"}`, key("k8")),
	} {
		t.Run(name, func(t *testing.T) {
			wantProblem(t, w, 422, idemhttp.ProblemKeyReused)
			if s := w.Body.String(); strings.Contains(s, "4242") || strings.Contains(s, "original-response") {
				t.Errorf("problem leaks the original: %s", s)
			}
		})
	}
	wantRuns(t, b, 1)
	if w := b.do("POST", "/x?q=1", `{"card":"4242"}`, key("k8")); !replayed(w) || w.Body.String() != `{"secret":"original-response"}` {
		t.Errorf("original no longer replays: %d %s", w.Code, w.Body)
	}
}

func TestH9H10InFlight(t *testing.T) {
	b := setup(t, idemhttp.Config{})
	b.up.hold = make(chan struct{})
	b.up.started = make(chan struct{}, 1)
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- b.do("POST", "/x", `{"a":1}`, key("k9")) }()
	<-b.up.started
	wantProblem(t, b.do("POST", "/x", `{"a":2}`, key("k9")), 422, idemhttp.ProblemKeyReused)
	w := b.do("POST", "/x", `{"a":1}`, key("k9"))
	wantProblem(t, w, 409, idemhttp.ProblemInProgress)
	if ra, err := strconv.Atoi(w.Header().Get("Retry-After")); err != nil || ra < 1 {
		t.Errorf("Retry-After = %q, want >= 1 s", w.Header().Get("Retry-After"))
	}
	close(b.up.hold)
	first := <-done
	if first.Code != 201 {
		t.Fatalf("original = %d", first.Code)
	}
	if w := b.do("POST", "/x", `{"a":1}`, key("k9")); !replayed(w) || w.Body.String() != first.Body.String() {
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
	defer release() // a failed check must not leave the run waiting
	answers := make(chan *httptest.ResponseRecorder, 50)
	start := make(chan struct{})
	for range 50 {
		go func() {
			<-start
			answers <- b.do("POST", "/x", `{"a":1}`, key("k10"))
		}()
	}
	close(start)
	for range 49 {
		wantProblem(t, <-answers, 409, idemhttp.ProblemInProgress)
	}
	release()
	if w := <-answers; w.Code != 201 || replayed(w) {
		t.Errorf("the one run: %d (replayed %v), want 201 from the handler", w.Code, replayed(w))
	}
	wantRuns(t, b, 1)
	if w := b.do("POST", "/x", `{"a":1}`, key("k10")); w.Code != 201 || !replayed(w) {
		t.Errorf("a retry after the run: %d, replayed %v; want the replay", w.Code, replayed(w))
	}
	wantRuns(t, b, 1)
}

func TestH12StoredStatuses(t *testing.T) {
	for _, tc := range []struct {
		status int
		stored bool
	}{
		{200, true}, {201, true}, {404, true}, {409, false}, {429, false}, {500, false}, {503, false},
	} {
		t.Run(strconv.Itoa(tc.status), func(t *testing.T) {
			b := setup(t, idemhttp.Config{})
			b.up.status = tc.status
			b.do("POST", "/x", `{}`, key("k12"))
			w := b.do("POST", "/x", `{}`, key("k12"))
			if replayed(w) != tc.stored || w.Code != tc.status {
				t.Fatalf("retry: %d replayed %v, want %d replayed %v", w.Code, replayed(w), tc.status, tc.stored)
			}
			want := 1
			if !tc.stored {
				want = 2
			}
			wantRuns(t, b, want)
		})
	}
}

// gin's c.Status only sets the status: headers set after it are still
// sent, and recorded, and a response without a body is recorded when the
// chain returns.
func TestStatusWithoutBody(t *testing.T) {
	s, _ := memstore.New(memstore.Config{})
	mw, _ := idemgin.New(idemhttp.Config{Store: s})
	var runs atomic.Int32
	e := gin.New()
	e.POST("/x", mw, func(c *gin.Context) {
		runs.Add(1)
		c.Status(http.StatusAccepted)
		c.Header("Location", "/jobs/1")
		if c.Writer.Status() != http.StatusAccepted || c.Writer.Written() {
			t.Errorf("gin writer: status %d, written %v", c.Writer.Status(), c.Writer.Written())
		}
	})
	for i := range 2 {
		w := serve(e, "POST", "/x", ``, key("k"))
		if w.Code != http.StatusAccepted || w.Header().Get("Location") != "/jobs/1" || replayed(w) != (i == 1) {
			t.Fatalf("response %d: %d %v", i, w.Code, w.Header())
		}
	}
	if runs.Load() != 1 {
		t.Errorf("runs = %d, want 1", runs.Load())
	}
}

// Handlers before the middleware see the status it sent, replays and
// errors included.
func TestOuterMiddlewareSeesStatus(t *testing.T) {
	s, _ := memstore.New(memstore.Config{})
	mw, _ := idemgin.New(idemhttp.Config{Store: s})
	var statuses []int
	e := gin.New()
	e.Use(func(c *gin.Context) {
		c.Next()
		statuses = append(statuses, c.Writer.Status())
	}, mw)
	e.POST("/x", func(c *gin.Context) { c.JSON(201, gin.H{}) })
	serve(e, "POST", "/x", `{}`, key("k"))
	serve(e, "POST", "/x", `{}`, key("k"))
	serve(e, "POST", "/x", `{"other":1}`, key("k"))
	if want := []int{201, 201, 422}; !equal(statuses, want) {
		t.Errorf("statuses seen outside = %v, want %v", statuses, want)
	}
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// failingStore is an idem.Store whose backend is down.
type failingStore struct{ idem.Store }

func (failingStore) Begin(context.Context, idem.Key, idem.Request, *idem.BeginOpts) (idem.Outcome, error) {
	return idem.Outcome{}, idem.Unavailable(errors.New("connection refused"))
}

func TestH18StoreUnavailable(t *testing.T) {
	b := setup(t, idemhttp.Config{Store: failingStore{}})
	wantProblem(t, b.do("POST", "/x", `{}`, key("k18")), 503, idemhttp.ProblemStoreUnavailable)
	wantRuns(t, b, 0)
	open := setup(t, idemhttp.Config{Store: failingStore{}, FailOpen: true})
	if w := open.do("POST", "/x", `{}`, key("k18")); w.Code != 201 {
		t.Errorf("fail-open: %d", w.Code)
	}
	wantRuns(t, open, 1)
}

func TestH19Limits(t *testing.T) {
	b := setup(t, idemhttp.Config{MaxBody: 1024, MaxCapture: 64})
	wantProblem(t, b.do("POST", "/x", strings.Repeat("x", 1025), key("big")), 413, idemhttp.ProblemBodyTooLarge)
	wantRuns(t, b, 0)
	body := strings.Repeat("y", 1024)
	if w := b.do("POST", "/x", body, key("k19")); w.Code != 201 || !strings.Contains(w.Body.String(), body) {
		t.Fatalf("large response: %d, %d bytes", w.Code, w.Body.Len())
	}
	if w := b.do("POST", "/x", body, key("k19")); replayed(w) {
		t.Error("a response over the capture cap was stored")
	}
	wantRuns(t, b, 2)
}

func TestH19StreamingNotStored(t *testing.T) {
	s, _ := memstore.New(memstore.Config{})
	mw, _ := idemgin.New(idemhttp.Config{Store: s})
	var runs atomic.Int32
	e := gin.New()
	e.POST("/events", mw, func(c *gin.Context) {
		runs.Add(1)
		i := 0
		c.Stream(func(w io.Writer) bool {
			i++
			_, _ = io.WriteString(w, "data: "+strconv.Itoa(i)+"\n\n")
			return i < 2
		})
	})
	for range 2 {
		w := serve(e, "POST", "/events", ``, key("s1"))
		if w.Body.String() != "data: 1\n\ndata: 2\n\n" || !w.Flushed || replayed(w) {
			t.Fatalf("stream delivered %q flushed=%v replayed=%v", w.Body, w.Flushed, replayed(w))
		}
	}
	if runs.Load() != 2 {
		t.Errorf("runs = %d, want 2 (streams are not stored)", runs.Load())
	}
}

// A panic releases the key and goes on to gin's recovery, which answers
// 500 through gin's own writer; the retry runs again.
func TestPanicReleasesKey(t *testing.T) {
	s, _ := memstore.New(memstore.Config{})
	mw, _ := idemgin.New(idemhttp.Config{Store: s})
	var runs atomic.Int32
	var recovered any
	e := gin.New()
	e.Use(gin.CustomRecoveryWithWriter(io.Discard, func(c *gin.Context, err any) {
		recovered = err
		c.AbortWithStatus(http.StatusInternalServerError)
	}), mw)
	e.POST("/x", func(c *gin.Context) {
		if runs.Add(1) == 1 {
			panic("boom")
		}
		c.JSON(201, gin.H{"run": 2})
	})
	if w := serve(e, "POST", "/x", `{}`, key("p1")); w.Code != 500 || recovered != "boom" {
		t.Fatalf("panicking request: %d, recovered %v", w.Code, recovered)
	}
	if w := serve(e, "POST", "/x", `{}`, key("p1")); w.Code != 201 || replayed(w) {
		t.Fatalf("retry after a panic: %d replayed %v", w.Code, replayed(w))
	}
	if w := serve(e, "POST", "/x", `{}`, key("p1")); !replayed(w) {
		t.Fatal("the retry's result was not recorded")
	}
	if runs.Load() != 2 {
		t.Errorf("runs = %d, want 2", runs.Load())
	}
}

// H21: the client's cancellation does not reach the handler; its result is
// recorded and the retry replays.
func TestH21ClientDisconnectDoesNotCancel(t *testing.T) {
	s, _ := memstore.New(memstore.Config{})
	mw, _ := idemgin.New(idemhttp.Config{Store: s})
	ctx, cancel := context.WithCancel(context.Background())
	var sawCancel atomic.Bool
	e := gin.New()
	e.ContextWithFallback = true
	e.POST("/x", mw, func(c *gin.Context) {
		cancel() // the client goes away mid-request
		sawCancel.Store(c.Request.Context().Err() != nil || c.Err() != nil)
		select {
		case <-c.Writer.CloseNotify():
			sawCancel.Store(true)
		default:
		}
		c.JSON(201, gin.H{"done": true})
	})
	serve(e, "POST", "/x", `{}`, key("k21"), func(r *http.Request) { *r = *r.WithContext(ctx) })
	if sawCancel.Load() {
		t.Fatal("the handler saw the client's cancellation")
	}
	if w := serve(e, "POST", "/x", `{}`, key("k21")); !replayed(w) || w.Body.String() != `{"done":true}` {
		t.Errorf("retry after disconnect: %d %s", w.Code, w.Body)
	}
}

func TestH14RetentionExpiry(t *testing.T) {
	b := setup(t, idemhttp.Config{Retention: time.Hour})
	b.do("POST", "/x", `{}`, key("k14"))
	b.clock.Advance(time.Hour - time.Second)
	if w := b.do("POST", "/x", `{}`, key("k14")); !replayed(w) {
		t.Fatal("not replayed within the retention")
	}
	b.clock.Advance(time.Second)
	if w := b.do("POST", "/x", `{}`, key("k14")); replayed(w) {
		t.Fatal("replayed after the retention")
	}
	wantRuns(t, b, 2)
}

func TestH17ScopesAreIndependent(t *testing.T) {
	b := setup(t, idemhttp.Config{})
	b.do("POST", "/x", `{"a":1}`, key("k17"), header("Authorization", "Bearer alice"))
	w := b.do("POST", "/x", `{"a":2}`, key("k17"), header("Authorization", "Bearer bob"))
	if w.Code != 201 || replayed(w) {
		t.Fatalf("bob: %d replayed %v", w.Code, replayed(w))
	}
	wa := b.do("POST", "/x", `{"a":1}`, key("k17"), header("Authorization", "Bearer alice"))
	wb := b.do("POST", "/x", `{"a":2}`, key("k17"), header("Authorization", "Bearer bob"))
	if !replayed(wa) || !replayed(wb) || !strings.Contains(wa.Body.String(), `\"a\":1`) || !strings.Contains(wb.Body.String(), `\"a\":2`) {
		t.Errorf("replays: alice %s, bob %s", wa.Body, wb.Body)
	}
	wantRuns(t, b, 2)
}

func TestEvents(t *testing.T) {
	b := setup(t, idemhttp.Config{})
	b.do("POST", "/x", `{}`, key("e"))
	b.do("POST", "/x", `{}`, key("e"))
	b.do("POST", "/x", `{"other":1}`, key("e"))
	b.do("GET", "/x", ``, key("e"))
	var got []idemhttp.Outcome
	for len(b.events) > 0 {
		e := <-b.events
		got = append(got, e.Outcome)
		if e.Outcome == idemhttp.OutcomeExecuted && e.Status != 201 {
			t.Errorf("executed event status %d", e.Status)
		}
	}
	want := []idemhttp.Outcome{idemhttp.OutcomeExecuted, idemhttp.OutcomeReplayed, idemhttp.OutcomeMismatch}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("events %v, want %v", got, want)
	}
}

func TestConfigError(t *testing.T) {
	if _, err := idemgin.New(idemhttp.Config{}); err == nil || !strings.Contains(err.Error(), "Config.Store") {
		t.Errorf("New without a store = %v, want an error naming Config.Store", err)
	}
}

// engineWithRenderer returns a gin engine with the middleware on memstore,
// behind, when renderer, the usual error renderer: a middleware that
// answers 500 with the last error after the chain when nothing was
// written.
func engineWithRenderer(t *testing.T, renderer bool) *gin.Engine {
	t.Helper()
	s, _ := memstore.New(memstore.Config{})
	mw, err := idemgin.New(idemhttp.Config{Store: s})
	if err != nil {
		t.Fatal(err)
	}
	e := gin.New()
	if renderer {
		e.Use(func(c *gin.Context) {
			c.Next()
			if len(c.Errors) > 0 && !c.Writer.Written() {
				c.JSON(http.StatusInternalServerError, gin.H{"error": c.Errors.Last().Error()})
			}
		})
	}
	e.Use(mw)
	return e
}

// A chain that fails with c.Error and writes nothing leaves the response
// to an error renderer outside the middleware: the client gets that, and
// a retry runs again rather than getting a recorded empty 200.
func TestCErrorWithNothingWrittenIsNotRecorded(t *testing.T) {
	runs := 0
	e := engineWithRenderer(t, true)
	e.POST("/charges", func(c *gin.Context) {
		if runs++; runs == 1 {
			_ = c.Error(errors.New("provider failed"))
			return
		}
		c.JSON(http.StatusCreated, gin.H{"id": "ch_1"})
	})
	if w := serve(e, "POST", "/charges", `{}`, key("c-error")); w.Code != 500 {
		t.Fatalf("first: %d %s, want the renderer's 500", w.Code, w.Body)
	}
	if w := serve(e, "POST", "/charges", `{}`, key("c-error")); w.Code != 201 || replayed(w) || runs != 2 {
		t.Fatalf("retry: %d replayed=%v after %d runs; want it to run again", w.Code, replayed(w), runs)
	}
	if w := serve(e, "POST", "/charges", `{}`, key("c-error")); w.Code != 201 || !replayed(w) {
		t.Fatalf("third: %d replayed=%v; want the recorded 201", w.Code, replayed(w))
	}
}

// A chain that attaches an error and sets a status without a body still
// answers that status, as without the middleware; it is not recorded.
func TestCErrorKeepsTheStatus(t *testing.T) {
	e := engineWithRenderer(t, false)
	e.POST("/charges", func(c *gin.Context) {
		_ = c.Error(errors.New("provider down"))
		c.Status(http.StatusServiceUnavailable)
	})
	for i := range 2 {
		if w := serve(e, "POST", "/charges", `{}`, key("status")); w.Code != http.StatusServiceUnavailable || replayed(w) {
			t.Fatalf("request %d: %d replayed=%v, want 503 from the handler", i, w.Code, replayed(w))
		}
	}
}

// c.AbortWithStatus sends its status at once, as in plain gin: an error
// renderer outside the middleware does not render over it, and the retry
// gets what the client got (run again: see
// TestAbortWithErrorBodyRenderedOutside).
func TestAbortWithStatusIsWhatTheClientGets(t *testing.T) {
	e := engineWithRenderer(t, true)
	e.POST("/charges", func(c *gin.Context) { _ = c.AbortWithError(http.StatusBadRequest, errors.New("bad")) })
	first := serve(e, "POST", "/charges", `{}`, key("abort"))
	retry := serve(e, "POST", "/charges", `{}`, key("abort"))
	if first.Code != 400 || retry.Code != 400 || first.Body.String() != retry.Body.String() {
		t.Fatalf("first %d %q, retry %d %q (replayed=%v); want the same 400", first.Code, first.Body, retry.Code, retry.Body, replayed(retry))
	}
}

// A request that matches no route is answered by gin, 404 or 405 with its
// body, with or without a key, every time: it is not recorded as an empty
// 200 and replayed.
func TestUnknownRoutesAnsweredByTheRouter(t *testing.T) {
	s, _ := memstore.New(memstore.Config{})
	mw, _ := idemgin.New(idemhttp.Config{Store: s})
	e := gin.New()
	e.HandleMethodNotAllowed = true
	e.Use(mw)
	e.GET("/only-get", func(c *gin.Context) { c.String(200, "got") })
	for _, tc := range []struct {
		path   string
		status int
		body   string
		opts   []reqOpt
	}{
		{"/nowhere", 404, "404 page not found", []reqOpt{key("k404")}},
		{"/nowhere", 404, "404 page not found", nil},
		{"/only-get", 405, "405 method not allowed", []reqOpt{key("k405")}},
	} {
		for i := range 2 {
			w := serve(e, "POST", tc.path, `{}`, tc.opts...)
			if w.Code != tc.status || w.Body.String() != tc.body || replayed(w) {
				t.Errorf("POST %s %d: %d %q replayed=%v, want %d %q", tc.path, i, w.Code, w.Body, replayed(w), tc.status, tc.body)
			}
		}
	}
}

// A status an outer middleware set before the chain stays the response's
// status when the handlers write nothing, as in plain gin.
func TestStatusSetBeforeTheMiddleware(t *testing.T) {
	s, _ := memstore.New(memstore.Config{})
	mw, _ := idemgin.New(idemhttp.Config{Store: s})
	e := gin.New()
	e.Use(func(c *gin.Context) { c.Status(http.StatusAccepted) }, mw)
	e.POST("/jobs", func(c *gin.Context) { c.Header("Location", "/jobs/1") })
	for i := range 2 {
		if w := serve(e, "POST", "/jobs", `{}`, key("k")); w.Code != http.StatusAccepted || replayed(w) != (i == 1) {
			t.Errorf("request %d: %d replayed=%v, want 202", i, w.Code, replayed(w))
		}
	}
}

// A header an outer middleware sets before the chain, as a compressor sets
// Content-Encoding for a client that accepts it, is its own, set again (or
// not) for each request: it is not recorded with the handler's response, so
// the retry of a client that does not accept gzip is not replayed a plain
// body labelled gzip.
func TestOuterHeadersNotRecorded(t *testing.T) {
	s, _ := memstore.New(memstore.Config{})
	mw, _ := idemgin.New(idemhttp.Config{Store: s})
	e := gin.New()
	e.Use(func(c *gin.Context) { // labels the response, as gin compressors do before the chain
		if strings.Contains(c.GetHeader("Accept-Encoding"), "gzip") {
			c.Header("Content-Encoding", "gzip")
			c.Header("X-Request-Id", "outer-"+c.GetHeader("Accept-Encoding"))
		}
	}, mw)
	e.POST("/x", func(c *gin.Context) {
		c.Header("Content-Language", "en")
		c.JSON(201, gin.H{"ok": true})
	})
	first := serve(e, "POST", "/x", `{}`, key("k"), header("Accept-Encoding", "gzip"))
	if first.Header().Get("Content-Encoding") != "gzip" {
		t.Fatalf("first: %v", first.Header())
	}
	retry := serve(e, "POST", "/x", `{}`, key("k"))
	if !replayed(retry) || retry.Code != 201 || retry.Header().Get("Content-Language") != "en" {
		t.Fatalf("retry: %d replayed=%v %v", retry.Code, replayed(retry), retry.Header())
	}
	if ce, rid := retry.Header().Get("Content-Encoding"), retry.Header().Get("X-Request-Id"); ce != "" || rid != "" {
		t.Errorf("retry without gzip replayed Content-Encoding %q, X-Request-Id %q set outside the middleware for the first request", ce, rid)
	}
}

// A body a middleware in front of this one read (by binding it, say) is
// gone by the time the middleware reads it: a body whose length was
// announced is then answered 400 body-unreadable, and the handler does not
// run, rather than the request being fingerprinted and run as an empty
// body.
func TestBodyReadBeforeTheMiddleware(t *testing.T) {
	s, _ := memstore.New(memstore.Config{})
	mw, _ := idemgin.New(idemhttp.Config{Store: s})
	e := gin.New()
	e.Use(func(c *gin.Context) {
		var v map[string]any
		if err := c.ShouldBindJSON(&v); err != nil {
			c.AbortWithStatus(http.StatusBadRequest)
		}
	}, mw)
	runs := 0
	e.POST("/x", func(c *gin.Context) {
		runs++
		c.Status(http.StatusCreated)
	})
	wantProblem(t, serve(e, "POST", "/x", `{"amount":100}`, key("k")), http.StatusBadRequest, idemhttp.ProblemBodyUnreadable)
	if runs != 0 {
		t.Errorf("the handler ran %d times", runs)
	}
}

// A request the middleware passes through unprotected (no key, none
// required) runs with the client's context, and c.Writer.CloseNotify
// reports the client leaving, as in plain gin: c.Stream then returns
// instead of streaming on, unheard, for as long as its step keeps going.
func TestPassThroughStreamStopsWhenTheClientLeaves(t *testing.T) {
	streamStopsWhenTheClientLeaves(t, "")
}

// A keyed POST answered with a stream (server-sent events, as an LLM API
// streams its completion) is not recorded once it flushes; from then on
// CloseNotify reports the client leaving, so that c.Stream stops rather
// than run on, writing events nobody reads (c.SSEvent keeps its write
// errors in c.Errors, where the loop never sees them).
func TestKeyedStreamStopsWhenTheClientLeaves(t *testing.T) { streamStopsWhenTheClientLeaves(t, "sse") }

// streamStopsWhenTheClientLeaves serves a POST, with key when not empty,
// whose handler streams events with c.Stream until the client leaves.
func streamStopsWhenTheClientLeaves(t *testing.T, key string) {
	s, _ := memstore.New(memstore.Config{})
	mw, _ := idemgin.New(idemhttp.Config{Store: s})
	e := gin.New()
	e.Use(mw)
	stopped := make(chan bool, 1) // true when c.Stream saw the client leave
	e.POST("/events", func(c *gin.Context) {
		deadline := time.Now().Add(5 * time.Second) // bounds the stream should the test fail
		stopped <- c.Stream(func(w io.Writer) bool {
			c.SSEvent("tick", "x")
			time.Sleep(5 * time.Millisecond)
			return time.Now().Before(deadline)
		})
	})
	srv := httptest.NewServer(e)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/events", strings.NewReader(`{}`))
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := res.Body.Read(make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	cancel()
	_ = res.Body.Close()
	select {
	case gone := <-stopped:
		if !gone {
			t.Error("the stream ended by itself, not because the client left")
		}
	case <-time.After(4 * time.Second):
		t.Fatal("the stream went on after the client left")
	}
}

// An error a middleware in front of this one attached (c.Error) before
// the chain ran is not the chain's: a protected handler's response without
// a body (a redirect to a POST, a 204) is recorded and replayed, rather
// than released and run again on the retry.
func TestErrorAttachedBeforeTheMiddlewareIsNotTheChains(t *testing.T) {
	s, _ := memstore.New(memstore.Config{})
	mw, _ := idemgin.New(idemhttp.Config{Store: s})
	e := gin.New()
	e.Use(func(c *gin.Context) {
		_ = c.Error(errors.New("deprecated API version")).SetType(gin.ErrorTypePrivate) // noted, not fatal
	}, mw)
	runs := 0
	e.POST("/charges", func(c *gin.Context) {
		runs++
		c.Redirect(http.StatusSeeOther, "/charges/ch_1")
	})
	for i := range 2 {
		w := serve(e, "POST", "/charges", `{}`, key("k"))
		if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/charges/ch_1" || replayed(w) != (i == 1) {
			t.Errorf("request %d: %d %v", i, w.Code, w.Header())
		}
	}
	if runs != 1 {
		t.Errorf("the handler ran %d times, want 1", runs)
	}
}

// For a method the middleware does not protect it stays out of the way:
// a request or writer that a middleware inside it set (c.Request with a
// context value, say) is what the middlewares outside see after c.Next, as
// in plain gin.
func TestUnprotectedMethodKeepsWhatTheChainSet(t *testing.T) {
	s, _ := memstore.New(memstore.Config{})
	mw, _ := idemgin.New(idemhttp.Config{Store: s})
	type userKey struct{}
	var seen []any
	e := gin.New()
	e.Use(func(c *gin.Context) { // a logger outside
		c.Next()
		seen = append(seen, c.Request.Context().Value(userKey{}))
	}, mw, func(c *gin.Context) { // authentication inside
		c.Request = c.Request.WithContext(context.WithValue(c.Request.Context(), userKey{}, "alice"))
	})
	e.GET("/x", func(c *gin.Context) { c.String(200, "ok") })
	for i := range 2 {
		if w := serve(e, "GET", "/x", ``, key("k")); w.Code != 200 {
			t.Fatalf("GET %d: %d", i, w.Code)
		}
	}
	if len(seen) != 2 || seen[0] != "alice" || seen[1] != "alice" {
		t.Errorf("the logger outside saw users %v, want [alice alice]", seen)
	}
}
