package idemhttp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/idemgo/idem"
)

// ReplayedHeader marks a response answered from a record.
const ReplayedHeader = "Idempotent-Replayed"

// New returns the middleware for cfg, or an error naming the Config field
// that is invalid.
func New(cfg Config) (func(http.Handler) http.Handler, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	m := &middleware{cfg: cfg, methods: map[string]bool{}}
	for _, method := range cfg.Methods {
		m.methods[strings.ToUpper(method)] = true
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			m.serve(w, r, next)
		})
	}, nil
}

// Middleware is like New but panics when cfg is invalid, like http.Handle
// does on a bad pattern. Use it where cfg is fixed at compile time.
func Middleware(cfg Config) func(http.Handler) http.Handler {
	mw, err := New(cfg)
	if err != nil {
		panic(err)
	}
	return mw
}

type middleware struct {
	cfg     Config
	methods map[string]bool
}

// exchange is the state of one protected request.
type exchange struct {
	m   *middleware
	w   http.ResponseWriter
	r   *http.Request
	ctx context.Context // r's context without its cancellation
	ev  Event
}

func (m *middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	if !m.methods[strings.ToUpper(r.Method)] {
		next.ServeHTTP(w, r)
		return
	}
	x := &exchange{m: m, w: w, r: r, ctx: context.WithoutCancel(r.Context()), ev: Event{Request: r}}
	defer x.emit()

	key, err := idem.ParseHeader(m.cfg.Namespace, r.Header.Values(idem.HeaderName))
	if errors.Is(err, idem.ErrKeyMissing) {
		if m.cfg.RequireKey {
			x.fail(OutcomeKeyMissing, &Problem{Type: ProblemKeyMissing, Title: "Idempotency-Key header missing", Status: http.StatusBadRequest,
				Detail: "This request requires an Idempotency-Key header."})
			return
		}
		x.ev.Outcome = OutcomePassThrough
		x.pass(next)
		return
	}
	if err != nil {
		detail := err.Error()
		var ke *idem.KeyError
		if errors.As(err, &ke) {
			detail = ke.Detail
		}
		x.fail(OutcomeKeyInvalid, &Problem{Type: ProblemKeyInvalid, Title: "Idempotency-Key header invalid", Status: http.StatusBadRequest, Detail: detail})
		return
	}
	if key, err = key.WithScope(m.cfg.KeyScope(r)); err != nil {
		x.fail(OutcomeStoreError, &Problem{Type: ProblemInternal, Title: "Internal error", Status: http.StatusInternalServerError, Detail: "invalid key scope"})
		return
	}

	body, ok := x.readBody()
	if !ok {
		return
	}
	req, err := m.request(r, body)
	if err != nil {
		x.fail(OutcomeKeyInvalid, &Problem{Type: ProblemInternal, Title: "Request fingerprint failed", Status: http.StatusInternalServerError, Detail: err.Error()})
		return
	}

	call := x.storeCtx()
	o, err := m.cfg.Store.Begin(call.ctx, key, req, &idem.BeginOpts{Retention: m.cfg.Retention, Lease: m.cfg.Lease})
	x.done(call)
	if err != nil {
		x.ev.Err = err
		if m.cfg.FailOpen {
			x.ev.Outcome = OutcomeStoreError
			x.pass(next)
			return
		}
		x.fail(OutcomeStoreError, &Problem{Type: ProblemStoreUnavailable, Title: "Idempotency store unavailable", Status: http.StatusServiceUnavailable,
			Detail: "The request was not run. Retry it later with the same key.", RetryAfter: time.Second})
		return
	}
	switch o.Kind {
	case idem.Fresh:
		x.run(next, key, o.Lease)
	case idem.PriorResult:
		x.replay(o.Result)
	case idem.Mismatch:
		x.fail(OutcomeMismatch, &Problem{Type: ProblemKeyReused, Title: "Idempotency-Key reused with a different request", Status: m.cfg.Profile.mismatchStatus(),
			Detail: "This key was first used with a different method, path, query or body. Use a new key for a new request."})
	case idem.InFlight:
		x.fail(OutcomeInProgress, &Problem{Type: ProblemInProgress, Title: "A request with this Idempotency-Key is in progress", Status: http.StatusConflict,
			Detail: "Retry after the original request completes.", RetryAfter: o.RetryAfter})
	default: // PriorError: never written by this middleware; another writer shares the namespace.
		x.fail(OutcomeReplayed, &Problem{Type: ProblemInternal, Title: "Recorded failure", Status: http.StatusInternalServerError,
			Detail: "The original request failed permanently."})
	}
}

// readBody reads the whole request body within MaxBody and puts it back
// for the handler.
func (x *exchange) readBody() ([]byte, bool) {
	r, max := x.r, x.m.cfg.MaxBody
	tooLarge := func() ([]byte, bool) {
		x.fail(OutcomeTooLarge, &Problem{Type: ProblemBodyTooLarge, Title: "Request body too large", Status: http.StatusRequestEntityTooLarge,
			Detail: fmt.Sprintf("Request bodies are limited to %d bytes.", max)})
		return nil, false
	}
	if r.ContentLength > max {
		return tooLarge()
	}
	var body []byte
	if r.Body != nil && r.Body != http.NoBody {
		b, err := readAll(r.Body, r.ContentLength, max)
		_ = r.Body.Close()
		if err != nil {
			x.fail(OutcomeKeyInvalid, &Problem{Type: ProblemInternal, Title: "Request body unreadable", Status: http.StatusBadRequest, Detail: "The request body could not be read."})
			return nil, false
		}
		if int64(len(b)) > max {
			return tooLarge()
		}
		body = b
	}
	br := &bodyReader{}
	br.Reset(body)
	r.Body = br
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	r.ContentLength = int64(len(body))
	r.TransferEncoding = nil
	return body, true
}

// request builds the Request Begin records: the fingerprint and a
// body-free description.
func (m *middleware) request(r *http.Request, body []byte) (idem.Request, error) {
	var fp idem.Fingerprint
	var err error
	if m.cfg.Fingerprint != nil {
		fp, err = m.cfg.Fingerprint(r, body)
	} else {
		fp, err = DefaultFingerprint(r, body)
	}
	if err != nil {
		return idem.Request{}, err
	}
	payload := appendRequest(make([]byte, 0, 128), strings.ToUpper(r.Method), r.URL.RequestURI(), r.Header.Get("Content-Type"), len(body))
	return idem.Request{Fingerprint: fp, Payload: payload}, nil
}

// DefaultFingerprint fingerprints a request by method, path and query, and
// body; a JSON body (Content-Type application/json or +json) counts by its
// canonical form, so member order and whitespace do not matter. A body
// labelled JSON that does not parse counts by its bytes.
func DefaultFingerprint(r *http.Request, body []byte) (idem.Fingerprint, error) {
	p := idem.RequestParts{Method: r.Method, Target: r.URL.RequestURI(), Body: body, JSON: isJSON(r.Header.Get("Content-Type"))}
	fp, err := idem.FingerprintRequest(p)
	if err != nil && p.JSON {
		p.JSON = false
		return idem.FingerprintRequest(p)
	}
	return fp, err
}

// isJSON reports whether a Content-Type is application/json or a +json
// type, ignoring parameters and case.
func isJSON(contentType string) bool {
	mt, _, _ := strings.Cut(contentType, ";")
	mt = strings.TrimSpace(mt)
	if len(mt) >= 5 && strings.EqualFold(mt[len(mt)-5:], "+json") {
		return strings.Contains(mt, "/")
	}
	return strings.EqualFold(mt, "application/json")
}

// storeCall is one store call's context, detached from the client's
// cancellation and bounded by StoreTimeout when set.
type storeCall struct {
	ctx    context.Context
	cancel context.CancelFunc
	start  time.Time
}

func (x *exchange) storeCtx() storeCall {
	c := storeCall{ctx: x.ctx, start: time.Now()}
	if x.m.cfg.StoreTimeout > 0 {
		c.ctx, c.cancel = context.WithTimeout(c.ctx, x.m.cfg.StoreTimeout)
	}
	return c
}

// done ends the call and accounts its time.
func (x *exchange) done(c storeCall) {
	if c.cancel != nil {
		c.cancel()
	}
	x.ev.StoreTime += time.Since(c.start)
}

// run executes the handler as the owner of key and records or releases the
// key afterwards.
func (x *exchange) run(next http.Handler, key idem.Key, lease idem.Lease) {
	store := x.m.cfg.Store
	ctx, cancel := context.WithCancelCause(x.ctx)
	defer cancel(nil)
	stop := idem.KeepAlive(ctx, store, key, lease, 0, func() { cancel(idem.ErrLeaseLost) })
	cw := &capture{w: x.w, max: x.m.cfg.MaxCapture, allow: x.m.cfg.replay}
	start := time.Now()
	defer func() {
		if p := recover(); p != nil {
			stop()
			x.ev.HandlerTime = time.Since(start)
			x.ev.Outcome, x.ev.Status = OutcomeReleased, http.StatusInternalServerError
			x.release(key, lease)
			panic(p)
		}
	}()
	next.ServeHTTP(cw, x.r.WithContext(ctx))
	stop()
	x.ev.HandlerTime = time.Since(start)
	cw.finish()
	x.ev.Status = cw.status
	if !cw.recordable() || !x.m.cfg.StoreStatus(cw.status) {
		x.ev.Outcome = OutcomeReleased
		x.release(key, lease)
		return
	}
	rec := appendResponse(make([]byte, 0, 64+cw.body.Len()*4/3), cw.status, cw.header, cw.body.Bytes())
	call := x.storeCtx()
	err := store.Commit(call.ctx, key, lease, rec)
	x.done(call)
	if err != nil {
		x.ev.Outcome, x.ev.Err = OutcomeReleased, err
		if !errors.Is(err, idem.ErrStaleToken) {
			x.release(key, lease)
		}
		return
	}
	x.ev.Outcome = OutcomeExecuted
}

// release frees the key so that a retry runs again.
func (x *exchange) release(key idem.Key, lease idem.Lease) {
	call := x.storeCtx()
	err := x.m.cfg.Store.FailTransient(call.ctx, key, lease)
	x.done(call)
	if err != nil && x.ev.Err == nil {
		x.ev.Err = err
	}
}

// replay writes a recorded response.
func (x *exchange) replay(b []byte) {
	rec, err := decodeResponse(b)
	if err != nil {
		x.ev.Err = err
		x.fail(OutcomeReplayed, &Problem{Type: ProblemInternal, Title: "Recorded response unreadable", Status: http.StatusInternalServerError})
		return
	}
	h := x.w.Header()
	for k, v := range rec.Header {
		if x.m.cfg.replaySet[k] {
			h[k] = v
		}
	}
	h.Set(ReplayedHeader, "true")
	x.ev.Outcome, x.ev.Status = OutcomeReplayed, rec.Status
	x.w.WriteHeader(rec.Status)
	_, _ = x.w.Write(rec.Body)
}

// fail answers with a problem.
func (x *exchange) fail(o Outcome, p *Problem) {
	x.ev.Outcome, x.ev.Status = o, p.Status
	x.m.cfg.ErrorWriter(x.w, x.r, p)
}

// pass hands the request to the handler unprotected.
func (x *exchange) pass(next http.Handler) {
	start := time.Now()
	cw := &capture{w: x.w, max: 0}
	defer func() {
		x.ev.HandlerTime = time.Since(start)
		cw.finish()
		x.ev.Status = cw.status
	}()
	next.ServeHTTP(cw, x.r)
}

func (x *exchange) emit() {
	if x.m.cfg.OnEvent != nil {
		x.m.cfg.OnEvent(x.ev)
	}
}

// bodyReader is the request body the handler reads: the bytes already read.
type bodyReader struct{ bytes.Reader }

func (*bodyReader) Close() error { return nil }

// readAll reads body, in one allocation when its length is known, and stops
// after max+1 bytes.
func readAll(body io.Reader, length, max int64) ([]byte, error) {
	if length < 0 || length > max {
		return io.ReadAll(io.LimitReader(body, max+1))
	}
	b := make([]byte, length, length+1)
	if _, err := io.ReadFull(body, b); err != nil {
		return nil, err
	}
	// A body longer than announced: read on to find out how much.
	var one [1]byte
	if n, _ := body.Read(one[:]); n > 0 {
		rest, err := io.ReadAll(io.LimitReader(body, max-length))
		return append(append(b, one[0]), rest...), err
	}
	return b, nil
}
