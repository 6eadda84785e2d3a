package idemecho_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"go.uber.org/goleak"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/contrib/idemecho"
	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/idemtest"
	"github.com/idemgo/idem/store/memstore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// upstream is a counting echo handler standing in for the protected API.
type upstream struct {
	n       atomic.Int32
	status  int
	err     error // when set, returned instead of a response
	header  http.Header
	body    string
	hold    chan struct{} // when set, requests wait on it
	started chan struct{} // when set, receives once per request as it starts
}

func (u *upstream) handle(c echo.Context) error {
	n := u.n.Add(1)
	if u.started != nil {
		u.started <- struct{}{}
	}
	if u.hold != nil {
		<-u.hold
	}
	if u.err != nil {
		return u.err
	}
	for k, v := range u.header {
		for _, s := range v {
			c.Response().Header().Add(k, s)
		}
	}
	status := u.status
	if status == 0 {
		status = http.StatusCreated
	}
	body := u.body
	if body == "" {
		b, _ := io.ReadAll(c.Request().Body)
		body = `{"run":` + strconv.Itoa(int(n)) + `,"echo":` + strconv.Quote(string(b)) + `}`
	}
	return c.Blob(status, "application/json", []byte(body))
}

type bundle struct {
	store  *memstore.Store
	clock  *idemtest.Clock
	up     *upstream
	echo   *echo.Echo
	errs   []error // what the middleware returned, seen from further out
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
	mw, err := idemecho.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b.echo = echo.New()
	b.echo.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			err := next(c)
			b.errs = append(b.errs, err)
			return err
		}
	}, mw)
	b.echo.Any("/*", b.up.handle)
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
	return serve(b.echo, method, target, body, opts...)
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
	// echo routes upper-case methods only, so "post" never reaches a handler.
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
	mw, _ := idemecho.New(idemhttp.Config{Store: s})
	e := echo.New()
	e.POST("/x", func(c echo.Context) error {
		c.SetCookie(&http.Cookie{Name: "session", Value: "secret"})
		return c.JSON(201, map[string]bool{"ok": true})
	}, mw)
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
	b.echo = echo.New() // without the error-collecting middleware, which is not safe for concurrent use
	mw, _ := idemecho.New(idemhttp.Config{Store: b.store})
	b.echo.Any("/*", b.up.handle, mw)
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

// A returned error is rendered inside the middleware, so an HTTPError is
// stored or released by its status like any response; the error still
// reaches the middlewares further out, the first time only.
func TestReturnedErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		status int
		stored bool
	}{
		{"404", echo.NewHTTPError(http.StatusNotFound, "no such customer"), 404, true},
		{"422", echo.NewHTTPError(http.StatusUnprocessableEntity, "invalid amount"), 422, true},
		{"500", echo.NewHTTPError(http.StatusInternalServerError, "database down"), 500, false},
		{"plain error", errors.New("boom"), 500, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := setup(t, idemhttp.Config{})
			b.up.err = tc.err
			first := b.do("POST", "/x", `{}`, key("k"))
			retry := b.do("POST", "/x", `{}`, key("k"))
			if first.Code != tc.status || retry.Code != tc.status || replayed(retry) != tc.stored {
				t.Fatalf("first %d, retry %d replayed %v; want %d, replayed %v", first.Code, retry.Code, replayed(retry), tc.status, tc.stored)
			}
			if !bytes.Equal(first.Body.Bytes(), retry.Body.Bytes()) {
				t.Errorf("bodies differ: %q / %q", first.Body, retry.Body)
			}
			if strings.Count(first.Body.String(), "message") != 1 {
				t.Errorf("the error was rendered more than once: %q", first.Body)
			}
			if b.errs[0] != tc.err {
				t.Errorf("the first request returned %v outwards, want %v", b.errs[0], tc.err)
			}
			if tc.stored && b.errs[1] != nil {
				t.Errorf("the replay returned %v outwards, want nil", b.errs[1])
			}
		})
	}
}

// Hooks registered on the response before the middleware run when the
// handler commits the response.
func TestOuterBeforeHooksRun(t *testing.T) {
	s, _ := memstore.New(memstore.Config{})
	mw, _ := idemecho.New(idemhttp.Config{Store: s})
	e := echo.New()
	e.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			c.Response().Before(func() { c.Response().Header().Set("X-Outer", "1") })
			return next(c)
		}
	}, mw)
	var statuses []int
	e.Use(func(next echo.HandlerFunc) echo.HandlerFunc { // runs inside the middleware
		return func(c echo.Context) error {
			err := next(c)
			statuses = append(statuses, c.Response().Status)
			return err
		}
	})
	e.POST("/x", func(c echo.Context) error { return c.JSON(201, map[string]int{}) })
	w := serve(e, "POST", "/x", `{}`, key("k"))
	if w.Header().Get("X-Outer") != "1" || w.Code != 201 {
		t.Errorf("first: %d, X-Outer %q", w.Code, w.Header().Get("X-Outer"))
	}
	if w := serve(e, "POST", "/x", `{}`, key("k")); w.Header().Get("X-Outer") != "1" || !replayed(w) {
		t.Errorf("replay: replayed %v, X-Outer %q", replayed(w), w.Header().Get("X-Outer"))
	}
	if len(statuses) != 1 || statuses[0] != 201 {
		t.Errorf("statuses seen inside = %v, want [201]", statuses)
	}
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
	mw, _ := idemecho.New(idemhttp.Config{Store: s})
	var runs atomic.Int32
	e := echo.New()
	e.POST("/events", func(c echo.Context) error {
		runs.Add(1)
		c.Response().Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(c.Response(), "data: 1\n\n")
		c.Response().Flush()
		_, _ = io.WriteString(c.Response(), "data: 2\n\n")
		return nil
	}, mw)
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

// A panic releases the key and goes on to echo's Recover middleware, which
// answers 500 through echo's own response; the retry runs again.
func TestPanicReleasesKey(t *testing.T) {
	s, _ := memstore.New(memstore.Config{})
	mw, _ := idemecho.New(idemhttp.Config{Store: s})
	var runs atomic.Int32
	var recovered error
	e := echo.New()
	e.Use(middleware.RecoverWithConfig(middleware.RecoverConfig{
		DisablePrintStack: true,
		LogErrorFunc: func(c echo.Context, err error, stack []byte) error {
			recovered = err
			return err
		},
	}), mw)
	e.POST("/x", func(c echo.Context) error {
		if runs.Add(1) == 1 {
			panic("boom")
		}
		return c.JSON(201, map[string]int{"run": 2})
	})
	if w := serve(e, "POST", "/x", `{}`, key("p1")); w.Code != 500 || recovered == nil || recovered.Error() != "boom" {
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
	mw, _ := idemecho.New(idemhttp.Config{Store: s})
	ctx, cancel := context.WithCancel(context.Background())
	var sawCancel atomic.Bool
	e := echo.New()
	e.POST("/x", func(c echo.Context) error {
		cancel() // the client goes away mid-request
		sawCancel.Store(c.Request().Context().Err() != nil)
		return c.JSON(201, map[string]bool{"done": true})
	}, mw)
	serve(e, "POST", "/x", `{}`, key("k21"), func(r *http.Request) { *r = *r.WithContext(ctx) })
	if sawCancel.Load() {
		t.Fatal("the handler saw the client's cancellation")
	}
	if w := serve(e, "POST", "/x", `{}`, key("k21")); !replayed(w) || strings.TrimSpace(w.Body.String()) != `{"done":true}` {
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
	if _, err := idemecho.New(idemhttp.Config{}); err == nil || !strings.Contains(err.Error(), "Config.Store") {
		t.Errorf("New without a store = %v, want an error naming Config.Store", err)
	}
}

// A request that matches no route is answered by the router, 404 or 405,
// with the key released and nothing stored, however the middleware is
// registered: once the route exists (a new version of the service behind a
// shared store), the retry with the same key runs it. A 404 the handler of
// a matched route returns, even echo.ErrNotFound itself, is recorded and
// replayed.
func TestUnknownRoutesNotRecorded(t *testing.T) {
	const routerNotFound = `{"message":"Not Found"}` + "\n"
	for _, tc := range []struct {
		name      string
		notFound  string // the body of the 404
		otherVerb int    // the status of POST to a path with only a GET route
		register  func(e *echo.Echo, mw echo.MiddlewareFunc) func(method, path string, h echo.HandlerFunc)
	}{
		{"Use", routerNotFound, 405, func(e *echo.Echo, mw echo.MiddlewareFunc) func(string, string, echo.HandlerFunc) {
			e.Use(mw)
			return func(m, p string, h echo.HandlerFunc) { e.Add(m, "/api"+p, h) }
		}},
		{"Pre", routerNotFound, 405, func(e *echo.Echo, mw echo.MiddlewareFunc) func(string, string, echo.HandlerFunc) {
			e.Pre(mw)
			return func(m, p string, h echo.HandlerFunc) { e.Add(m, "/api"+p, h) }
		}},
		{"Group", routerNotFound, 404, func(e *echo.Echo, mw echo.MiddlewareFunc) func(string, string, echo.HandlerFunc) {
			g := e.Group("/api", mw) // registers a RouteNotFound catch-all for /api
			return func(m, p string, h echo.HandlerFunc) { g.Add(m, p, h) }
		}},
		{"Host", routerNotFound, 404, func(e *echo.Echo, mw echo.MiddlewareFunc) func(string, string, echo.HandlerFunc) {
			g := e.Host("example.com", mw) // the host of httptest requests; registers a RouteNotFound catch-all
			return func(m, p string, h echo.HandlerFunc) { g.Add(m, "/api"+p, h) }
		}},
		{"RouteNotFound", `{"message":"no such route"}` + "\n", 404, func(e *echo.Echo, mw echo.MiddlewareFunc) func(string, string, echo.HandlerFunc) {
			e.Use(mw)
			e.RouteNotFound("/api/*", func(c echo.Context) error {
				return c.JSON(http.StatusNotFound, map[string]string{"message": "no such route"})
			})
			return func(m, p string, h echo.HandlerFunc) { e.Add(m, "/api"+p, h) }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := memstore.New(memstore.Config{})
			events := make(chan idemhttp.Event, 100)
			mw, err := idemecho.New(idemhttp.Config{Store: s, OnEvent: func(e idemhttp.Event) { events <- e }})
			if err != nil {
				t.Fatal(err)
			}
			e := echo.New()
			add := tc.register(e, mw)
			add("GET", "/only-get", func(c echo.Context) error { return c.String(200, "got") })
			customers := 0
			add("POST", "/customers/:id", func(c echo.Context) error {
				customers++
				return echo.ErrNotFound // no such customer
			})

			lastEvent := func() idemhttp.Outcome {
				t.Helper()
				var last idemhttp.Outcome
				for len(events) > 0 {
					last = (<-events).Outcome
				}
				return last
			}
			for i := range 2 {
				w := serve(e, "POST", "/api/nowhere", `{}`, key("k404"))
				if w.Code != 404 || replayed(w) || w.Body.String() != tc.notFound {
					t.Fatalf("POST /api/nowhere %d: %d %q replayed=%v, want the router's 404", i, w.Code, w.Body, replayed(w))
				}
				if o := lastEvent(); o != idemhttp.OutcomeReleased {
					t.Errorf("POST /api/nowhere %d: event %q, want %q", i, o, idemhttp.OutcomeReleased)
				}
				w = serve(e, "POST", "/api/only-get", `{}`, key("k405"))
				if w.Code != tc.otherVerb || replayed(w) {
					t.Fatalf("POST /api/only-get %d: %d %q replayed=%v, want the router's %d", i, w.Code, w.Body, replayed(w), tc.otherVerb)
				}
				if tc.otherVerb == 405 && w.Header().Get("Allow") == "" {
					t.Errorf("POST /api/only-get %d: 405 without Allow", i)
				}
				if o := lastEvent(); o != idemhttp.OutcomeReleased {
					t.Errorf("POST /api/only-get %d: event %q, want %q", i, o, idemhttp.OutcomeReleased)
				}
			}

			// The route appears: the retry runs it.
			add("POST", "/nowhere", func(c echo.Context) error { return c.String(201, "created") })
			if w := serve(e, "POST", "/api/nowhere", `{}`, key("k404")); w.Code != 201 || w.Body.String() != "created" || replayed(w) {
				t.Fatalf("retry once the route exists: %d %q replayed=%v, want the handler's 201", w.Code, w.Body, replayed(w))
			}

			// A handler's own 404 is an answer about the resource: recorded.
			first := serve(e, "POST", "/api/customers/7", `{}`, key("k-customer"))
			retry := serve(e, "POST", "/api/customers/7", `{}`, key("k-customer"))
			if first.Code != 404 || retry.Code != 404 || !replayed(retry) || customers != 1 {
				t.Fatalf("handler's 404: first %d, retry %d replayed=%v, %d runs; want it recorded and replayed", first.Code, retry.Code, replayed(retry), customers)
			}
		})
	}
}

// A body a middleware in front of this one read (by binding it, say) is
// gone by the time the middleware reads it: a body whose length was
// announced is then answered 400 body-unreadable, and the handler does not
// run, rather than the request being fingerprinted and run as an empty
// body.
func TestBodyReadBeforeTheMiddleware(t *testing.T) {
	s, _ := memstore.New(memstore.Config{})
	mw, _ := idemecho.New(idemhttp.Config{Store: s})
	e := echo.New()
	e.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			var v map[string]any
			if err := c.Bind(&v); err != nil {
				return err
			}
			return next(c)
		}
	}, mw)
	runs := 0
	e.POST("/x", func(c echo.Context) error {
		runs++
		return c.NoContent(http.StatusCreated)
	})
	wantProblem(t, serve(e, "POST", "/x", `{"amount":100}`, key("k")), http.StatusBadRequest, idemhttp.ProblemBodyUnreadable)
	if runs != 0 {
		t.Errorf("the handler ran %d times", runs)
	}
}

// A route and a RouteNotFound route on one path: a request with the
// route's method runs the route, so its 404 is the handler's, recorded;
// one with another method gets the RouteNotFound route's, not recorded.
func TestRouteAndRouteNotFoundOnOnePath(t *testing.T) {
	s, _ := memstore.New(memstore.Config{})
	mw, _ := idemecho.New(idemhttp.Config{Store: s, Methods: []string{"POST", "PUT"}})
	e := echo.New()
	e.Use(mw)
	runs := 0
	e.POST("/files/*", func(c echo.Context) error {
		runs++
		return echo.ErrNotFound // no such file
	})
	e.RouteNotFound("/files/*", func(c echo.Context) error { return c.String(http.StatusNotFound, "no such route") })
	first := serve(e, "POST", "/files/a", `{}`, key("post"))
	retry := serve(e, "POST", "/files/a", `{}`, key("post"))
	if first.Code != 404 || !replayed(retry) || runs != 1 {
		t.Errorf("POST: first %d, retry %d replayed=%v after %d runs; want the handler's 404 recorded", first.Code, retry.Code, replayed(retry), runs)
	}
	for i := range 2 {
		if w := serve(e, "PUT", "/files/a", `{}`, key("put")); w.Code != 404 || w.Body.String() != "no such route" || replayed(w) {
			t.Errorf("PUT %d: %d %q replayed=%v, want the RouteNotFound route's 404, not recorded", i, w.Code, w.Body, replayed(w))
		}
	}
}

// The response the handlers inside the middleware see starts as echo's
// own does, with status 200 (or the one a middleware outside set), so that
// a logger or metrics middleware inside reports the 200 the client gets
// for a handler that writes nothing, not 0.
func TestInnerResponseStartsWithEchosStatus(t *testing.T) {
	s, _ := memstore.New(memstore.Config{})
	mw, _ := idemecho.New(idemhttp.Config{Store: s})
	e := echo.New()
	var before, after []int
	e.Use(mw, func(next echo.HandlerFunc) echo.HandlerFunc { // a status logger inside
		return func(c echo.Context) error {
			before = append(before, c.Response().Status)
			err := next(c)
			after = append(after, c.Response().Status)
			return err
		}
	})
	e.POST("/x", func(c echo.Context) error { return nil })
	e.GET("/x", func(c echo.Context) error { return nil })
	for _, r := range []struct{ method, key string }{{"POST", "k"}, {"POST", ""}, {"GET", ""}} {
		var opts []reqOpt
		if r.key != "" {
			opts = append(opts, key(r.key))
		}
		if w := serve(e, r.method, "/x", `{}`, opts...); w.Code != 200 {
			t.Fatalf("%s key %q: %d", r.method, r.key, w.Code)
		}
	}
	if want := []int{200, 200, 200}; !slices.Equal(before, want) || !slices.Equal(after, want) {
		t.Errorf("statuses inside: before the handler %v, after it %v; want %v, as echo's own response", before, after, want)
	}
}

// For a method the middleware does not protect it stays out of the way:
// a request or response that a middleware inside it set (c.SetRequest
// with a context value, say) is what the middlewares outside see after
// next returns, as without the middleware.
func TestUnprotectedMethodKeepsWhatTheChainSet(t *testing.T) {
	s, _ := memstore.New(memstore.Config{})
	mw, _ := idemecho.New(idemhttp.Config{Store: s})
	type userKey struct{}
	var seen []any
	e := echo.New()
	e.Use(func(next echo.HandlerFunc) echo.HandlerFunc { // a logger outside
		return func(c echo.Context) error {
			err := next(c)
			seen = append(seen, c.Request().Context().Value(userKey{}))
			return err
		}
	}, mw, func(next echo.HandlerFunc) echo.HandlerFunc { // authentication inside
		return func(c echo.Context) error {
			c.SetRequest(c.Request().WithContext(context.WithValue(c.Request().Context(), userKey{}, "alice")))
			return next(c)
		}
	})
	e.GET("/x", func(c echo.Context) error { return c.String(200, "ok") })
	for i := range 2 {
		if w := serve(e, "GET", "/x", ``, key("k")); w.Code != 200 {
			t.Fatalf("GET %d: %d", i, w.Code)
		}
	}
	if len(seen) != 2 || seen[0] != "alice" || seen[1] != "alice" {
		t.Errorf("the logger outside saw users %v, want [alice alice]", seen)
	}
}
