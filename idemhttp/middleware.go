package idemhttp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"strconv"
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
	m := &middleware{cfg: cfg, methods: map[string]bool{}, timed: cfg.OnEvent != nil,
		beginOpts: &idem.BeginOpts{Retention: cfg.Retention, Lease: cfg.Lease}}
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
	// timed says whether times are measured: only for OnEvent.
	timed bool
	// beginOpts are the options of every Begin. Stores only read them.
	beginOpts *idem.BeginOpts
}

// exchange is the state of one protected request. It is allocated once
// per request, with the capture writer and the body reader the handler
// gets.
type exchange struct {
	m *middleware
	// ev is the event of the request, ev.Request the request (see req).
	ev Event
	// detached is r's context without its cancellation (see ctx), kept
	// here to save an allocation.
	detached detachedContext
	// cw is the writer the handler gets; cw.w is the client's, which the
	// middleware's own answers are written to.
	cw   capture
	body bodyReader
	buf  *[]byte // a pooled buffer for encoding, nil until needed
}

// req is x's request.
func (x *exchange) req() *http.Request { return x.ev.Request }

// ctx is r's context without its cancellation, for the store calls and
// the handler: finished work is recorded even when the client has gone.
func (x *exchange) ctx() context.Context { return &x.detached }

// protects reports whether requests with method are protected.
func (m *middleware) protects(method string) bool {
	if p, ok := m.methods[method]; ok {
		return p
	}
	return m.methods[strings.ToUpper(method)]
}

func (m *middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	if !m.protects(r.Method) {
		next.ServeHTTP(w, r)
		return
	}
	x := &exchange{m: m, ev: Event{Request: r}}
	x.cw.w = w
	x.detached.parent = r.Context()
	defer x.end()

	key, err := idem.ParseHeader(m.cfg.Namespace, r.Header[idem.HeaderName])
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
	if key, err = key.WithScope(x.keyScope()); err != nil {
		x.ev.Err = fmt.Errorf("idemhttp: Config.KeyScope: %w", err)
		x.fail(OutcomeInternal, &Problem{Type: ProblemInternal, Title: "Internal error", Status: http.StatusInternalServerError, Detail: "The key's scope could not be determined."})
		return
	}

	body, ok := x.readBody()
	if !ok {
		return
	}
	req, err := x.request(body)
	if err != nil {
		x.ev.Err = err
		x.fail(OutcomeInternal, &Problem{Type: ProblemInternal, Title: "Request fingerprint failed", Status: http.StatusInternalServerError, Detail: "The request could not be fingerprinted."})
		return
	}

	if m.cfg.BeginTx != nil {
		x.serveTx(next, key, req)
		return
	}
	call := x.storeCtx()
	o, err := m.cfg.Store.Begin(call.ctx, key, req, m.beginOpts)
	x.done(call)
	if err != nil {
		x.storeFailed(next, err)
		return
	}
	switch o.Kind {
	case idem.Fresh:
		if o.Lease.Token == "" { // the handler cannot run as the key's owner (Owner.Run would not run it)
			x.storeFailed(next, fmt.Errorf("idemhttp: %T.Begin answered Fresh without a lease", m.cfg.Store))
			return
		}
		x.run(next, key, o.Lease)
	default:
		x.answer(o)
	}
}

// answer answers a request whose Begin did not reserve the key: from the
// record, or with the problem the outcome o calls for.
func (x *exchange) answer(o idem.Outcome) {
	switch o.Kind {
	case idem.PriorResult:
		x.replay(o.Result)
	case idem.Mismatch:
		x.fail(OutcomeMismatch, &Problem{Type: ProblemKeyReused, Title: "Idempotency-Key reused with a different request", Status: x.m.cfg.Profile.mismatchStatus(),
			Detail: "This key was first used with a different method, path, query or body. Use a new key for a new request."})
	case idem.InFlight:
		x.fail(OutcomeInProgress, &Problem{Type: ProblemInProgress, Title: "A request with this Idempotency-Key is in progress", Status: http.StatusConflict,
			Detail: "Retry after the original request completes.", RetryAfter: max(o.RetryAfter, time.Second)})
	default: // PriorError: never written by this middleware; another writer shares the namespace.
		x.fail(OutcomeReplayed, &Problem{Type: ProblemInternal, Title: "Recorded failure", Status: http.StatusInternalServerError,
			Detail: "The original request failed permanently."})
	}
}

// storeFailed answers a request whose Begin failed with err: 503, or the
// handler unprotected with FailOpen.
func (x *exchange) storeFailed(next http.Handler, err error) {
	x.ev.Err = err
	if x.m.cfg.FailOpen {
		x.ev.Outcome = OutcomeStoreError
		x.lendBody()
		x.pass(next)
		return
	}
	x.fail(OutcomeStoreError, &Problem{Type: ProblemStoreUnavailable, Title: "Idempotency store unavailable", Status: http.StatusServiceUnavailable,
		Detail: "The request was not run. Retry it later with the same key.", RetryAfter: time.Second})
}

// readBody reads the whole request body within MaxBody (and BodyTimeout)
// and puts it back for the handler.
func (x *exchange) readBody() ([]byte, bool) {
	r, max := x.req(), x.m.cfg.MaxBody
	if r.ContentLength > max {
		x.tooLarge()
		return nil, false
	}
	var body []byte
	if r.Body != nil && r.Body != http.NoBody {
		var b []byte
		var err error
		if x.m.cfg.BodyTimeout > 0 {
			b, err = x.readWithin(x.m.cfg.BodyTimeout)
		} else {
			b, err = readAll(r.Body, r.ContentLength, max)
			_ = r.Body.Close()
		}
		if err != nil {
			if _, ok := errors.AsType[*http.MaxBytesError](err); ok { // a limit set before the middleware
				x.tooLarge()
				return nil, false
			}
			if err == errBodyTimeout {
				x.fail(OutcomeBodyTimeout, &Problem{Type: ProblemBodyTimeout, Title: "Request body not received in time", Status: http.StatusRequestTimeout,
					Detail: fmt.Sprintf("The request body was not received within %s.", x.m.cfg.BodyTimeout)})
				return nil, false
			}
			x.fail(OutcomeBodyUnreadable, &Problem{Type: ProblemBodyUnreadable, Title: "Request body unreadable", Status: http.StatusBadRequest, Detail: "The request body could not be read."})
			return nil, false
		}
		if int64(len(b)) > max {
			x.tooLarge()
			return nil, false
		}
		body = b
	}
	x.body.Reset(body)
	r.Body = &x.body
	r.GetBody = nil // set by lendBody, only for a handler that runs
	r.ContentLength = int64(len(body))
	r.TransferEncoding = nil
	return body, true
}

// readWithin reads x's request body as readBody does, within d: under a
// read deadline on the connection, cleared once the body is read and
// closed (closing it may read on, to the end of the body). A body not
// received in time is errBodyTimeout. A writer that cannot set deadlines
// has the body read without one.
func (x *exchange) readWithin(d time.Duration) ([]byte, error) {
	r, rc := x.req(), http.NewResponseController(x.cw.w)
	err := rc.SetReadDeadline(time.Now().Add(d))
	deadline := err == nil
	if !deadline && !errors.Is(err, http.ErrNotSupported) {
		_ = r.Body.Close()
		return nil, err // the connection is gone
	}
	b, err := readAll(r.Body, r.ContentLength, x.m.cfg.MaxBody)
	_ = r.Body.Close()
	if !deadline {
		return b, err
	}
	_ = rc.SetReadDeadline(time.Time{})
	if ne, ok := errors.AsType[net.Error](err); errors.Is(err, os.ErrDeadlineExceeded) || ok && ne.Timeout() {
		err = errBodyTimeout
	}
	return b, err
}

// errBodyTimeout is readWithin's error for a body not received in time.
var errBodyTimeout = errors.New("idemhttp: request body not received within Config.BodyTimeout")

// lendBody readies x's request, whose body readBody read, for the handler: its
// GetBody, which net/http's client and ReverseProxy use to send the body
// again, reads the bytes already read. It is made only for a handler that
// runs, sparing replays an allocation.
func (x *exchange) lendBody() {
	x.req().GetBody = func() (io.ReadCloser, error) {
		return io.NopCloser(io.NewSectionReader(&x.body.Reader, 0, x.body.Size())), nil
	}
}

func (x *exchange) tooLarge() {
	x.fail(OutcomeTooLarge, &Problem{Type: ProblemBodyTooLarge, Title: "Request body too large", Status: http.StatusRequestEntityTooLarge,
		Detail: fmt.Sprintf("Request bodies are limited to %d bytes.", x.m.cfg.MaxBody)})
}

// request builds the Request Begin records: the fingerprint and a
// body-free description, encoded in x's buffer (stores keep a copy of
// what they record, never the buffer).
func (x *exchange) request(body []byte) (idem.Request, error) {
	r := x.req()
	target, contentType := r.URL.RequestURI(), headerValue(r.Header, "Content-Type")
	var fp idem.Fingerprint
	var err error
	if x.m.cfg.Fingerprint != nil {
		fp, err = x.fingerprint(body)
		// One that read r.Body rather than body leaves the handler the
		// whole body all the same.
		x.body.Reset(body)
		r.Body = &x.body
	} else {
		fp, err = defaultFingerprint(r.Method, target, contentType, body)
	}
	switch {
	case err != nil:
		return idem.Request{}, fmt.Errorf("idemhttp: Config.Fingerprint: %w", err)
	case fp.IsZero():
		return idem.Request{}, errors.New("idemhttp: Config.Fingerprint returned the zero Fingerprint")
	}
	payload := appendRequest(x.buffer(), strings.ToUpper(r.Method), target, contentType, len(body))
	*x.buf = payload
	return idem.Request{Fingerprint: fp, Payload: payload}, nil
}

// keyScope is Config.KeyScope's answer for x's request.
func (x *exchange) keyScope() string {
	defer x.panicked("Config.KeyScope")
	return x.m.cfg.KeyScope(x.req())
}

// fingerprint is Config.Fingerprint's answer for x's request.
func (x *exchange) fingerprint(body []byte) (idem.Fingerprint, error) {
	defer x.panicked("Config.Fingerprint")
	return x.m.cfg.Fingerprint(x.req(), body)
}

// panicked, deferred around a call of the configuration's function fn,
// describes a panic of fn in x's event, as an internal error answered
// with the 500 a recovering middleware outside writes, and lets it go on.
func (x *exchange) panicked(fn string) {
	if v := recover(); v != nil {
		x.ev.Outcome, x.ev.Status = OutcomeInternal, http.StatusInternalServerError
		x.ev.Err = fmt.Errorf("idemhttp: %s panicked: %v", fn, v)
		panic(v)
	}
}

// DefaultFingerprint fingerprints a request by method, path and query, and
// body; a JSON body (Content-Type application/json or +json) counts by its
// canonical form, so member order and whitespace do not matter. A body
// labelled JSON that does not parse counts by its bytes, and so does a
// body sent with a Content-Encoding (gzip, say): it is not decoded, so a
// retry must send the same encoded bytes.
func DefaultFingerprint(r *http.Request, body []byte) (idem.Fingerprint, error) {
	return defaultFingerprint(r.Method, r.URL.RequestURI(), headerValue(r.Header, "Content-Type"), body)
}

func defaultFingerprint(method, target, contentType string, body []byte) (idem.Fingerprint, error) {
	p := idem.RequestParts{Method: method, Target: target, Body: body, JSON: isJSON(contentType)}
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
	if contentType == "application/json" {
		return true
	}
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
	c := storeCall{ctx: x.ctx()}
	if x.m.timed {
		c.start = time.Now()
	}
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
	if x.m.timed {
		x.ev.StoreTime += time.Since(c.start)
	}
}

// now is the time, when times are measured.
func (x *exchange) now() time.Time {
	if x.m.timed {
		return time.Now()
	}
	return time.Time{}
}

// since is the time since start, when times are measured.
func (x *exchange) since(start time.Time) time.Duration {
	if x.m.timed {
		return time.Since(start)
	}
	return 0
}

// run executes the handler as the owner of key and records or releases the
// key afterwards.
func (x *exchange) run(next http.Handler, key idem.Key, lease idem.Lease) {
	x.lendBody()
	cw := &x.cw
	cw.init(x.m.cfg.MaxCapture, &x.m.cfg)
	cw.recording, cw.head, cw.h1 = true, x.req().Method == http.MethodHead, x.req().ProtoMajor < 2
	cw.outside()
	// What a panic in the handler leaves: the key released.
	x.ev.Outcome = OutcomeReleased
	o := idem.Owner{Store: x.m.cfg.Store, Key: key, Lease: lease, SettleTimeout: x.m.cfg.StoreTimeout, Timed: x.m.timed,
		OnCommitRetry: x.sendHeld}
	defer func() { // also when the handler panicked
		x.ev.StoreTime += o.SettleTime
		if x.ev.Err == nil {
			x.ev.Err = o.Err
		}
	}()
	o.Run(x.ctx(), func(ctx context.Context) ([]byte, bool) {
		start := x.now()
		served := false
		defer func() {
			if !served {
				x.ev.HandlerTime = x.since(start)
				x.ev.Status = cw.sent(true)
			}
		}()
		next.ServeHTTP(cw, x.req().WithContext(ctx))
		served = true
		x.ev.HandlerTime = x.since(start)
		cw.finish(x.req())
		x.ev.Status = cw.sent(false)
		return x.record()
	})
	if o.Recorded {
		x.ev.Outcome = OutcomeExecuted
	}
}

// sendHeld sends the client what net/http still holds of the response,
// which the handler has written whole, while its Commit is made again
// through a store outage, so that the client need not wait for the record
// (a response relayed by NewProxy, say, with its upstream's
// Content-Length). Over HTTP/1 only a response whose end the client can
// tell without the connection's next bytes is sent so (a declared
// Content-Length, no body): one of undeclared length would be sent
// chunked, its last chunk still held. Over HTTP/2 the header and body go
// out, but the stream ends only when the handler chain returns, once the
// Commit is done: the client has the header, not the end of the response.
func (x *exchange) sendHeld() {
	if cw := &x.cw; !cw.h1 || cw.unchunked || cw.head || !bodyAllowed(cw.status) {
		_ = http.NewResponseController(cw.w).Flush()
	}
}

// record returns the record of the response the handler wrote, encoded in
// x's buffer, and true; or false when it is not to be recorded (see
// capture.recordable and Config.StoreStatus).
func (x *exchange) record() ([]byte, bool) {
	cw := &x.cw
	if !cw.recordable() || !x.m.cfg.StoreStatus(cw.status) {
		return nil, false
	}
	body := cw.body
	if !bodyAllowed(cw.status) {
		body = nil // written after a 204 or 304, and never sent
	}
	rec := appendResponse(x.buffer(), cw.status, cw.header, body)
	*x.buf = rec
	return rec, true
}

// replay writes a recorded response.
func (x *exchange) replay(b []byte) {
	// The storage of the replayed header values (see capture.values):
	// the value of ReplayedHeader, two recorded values (more go to the
	// heap), and the replay's Content-Length. They go into the response's
	// header, so x is never reused.
	values := &x.cw.values
	values[0] = "true"
	replayed := values[0:1:1]
	rec, err := readResponse(b, x.buffer(), x.cw.hdr[:0], values[1:1:3])
	if err != nil {
		x.ev.Err = err
		x.fail(OutcomeReplayed, &Problem{Type: ProblemInternal, Title: "Recorded response unreadable", Status: http.StatusInternalServerError})
		return
	}
	*x.buf = rec.body[:0]
	h := x.cw.w.Header()
	trailers := false
	var coding []string // the recorded Content-Encoding
	head := x.req().Method == http.MethodHead
	for _, f := range rec.header {
		switch {
		case x.m.cfg.replaySet[f.name]:
			h[f.name] = f.values
			if f.name == "Content-Encoding" {
				coding = f.values
			}
		case replayedTrailer(f.name): // net/http sends it after the body
			h[f.name] = f.values
			trailers = true
		case f.name == "Content-Length" && head: // of the body a HEAD does not send
			h[f.name] = f.values
		}
	}
	h[ReplayedHeader] = replayed
	// A body in a coding the retry does not accept, which the replay
	// decodes as it sends it: of a length it does not know beforehand.
	// Not a range of the coded bytes (Content-Range), which does not
	// decode alone.
	var body io.Reader
	_, ranged := h["Content-Range"]
	if name := unacceptedCoding(coding, x.req().Header); name != "" && bodyAllowed(rec.status) && !ranged {
		if head {
			decodedHeader(h) // as the GET's replay sends it
			delete(h, "Content-Length")
		} else if body = decoded(name, rec.body); body != nil {
			decodedHeader(h)
			if _, typed := h["Content-Type"]; !typed && x.m.cfg.replaySet["Content-Type"] {
				// Sent first with its coding, which net/http does not
				// sniff: the decoded body is not sniffed either.
				h["Content-Type"] = nil
			}
		}
	}
	if bodyAllowed(rec.status) && !head && !trailers && body == nil {
		// The length the first answer had or could have had: without it
		// net/http chunks a body beyond its buffer.
		values[3] = strconv.Itoa(len(rec.body))
		h["Content-Length"] = values[3:4:4]
	}
	x.ev.Outcome, x.ev.Status = OutcomeReplayed, rec.status
	x.cw.w.WriteHeader(rec.status)
	if body != nil {
		x.sendDecoded(body)
		return
	}
	_, _ = x.cw.w.Write(rec.body)
}

// decodedHeader mends, in h, the recorded header of a body replayed
// decoded: its Content-Encoding goes; a strong ETag, which names the coded
// bytes, becomes weak (the decoded body is the same content, not the same
// bytes); and digests of the coded bytes go.
func decodedHeader(h http.Header) {
	delete(h, "Content-Encoding")
	if tag := h["Etag"]; len(tag) == 1 && !strings.HasPrefix(tag[0], "W/") {
		h["Etag"] = []string{"W/" + tag[0]}
	}
	for _, name := range []string{"Content-Md5", "Content-Digest", "Repr-Digest", "Digest"} {
		delete(h, name)
	}
}

// sendDecoded writes body, a recorded body being decoded, to the client.
// A body that does not decode to its end (corrupt, cut short, a checksum
// that does not match) cuts the response off with http.ErrAbortHandler,
// as ReverseProxy does on an upstream body that breaks: the client
// sees an error, not a body that looks whole.
func (x *exchange) sendDecoded(body io.Reader) {
	buf := copyBufferPool.Get().(*[]byte)
	defer copyBufferPool.Put(buf)
	for {
		n, err := body.Read(*buf)
		if n > 0 {
			if _, werr := x.cw.w.Write((*buf)[:n]); werr != nil {
				return // the client went away
			}
		}
		switch {
		case err == io.EOF:
			return
		case err != nil:
			x.ev.Err = fmt.Errorf("idemhttp: recorded body does not decode from its Content-Encoding: %w", err)
			panic(http.ErrAbortHandler)
		}
	}
}

// fail answers with a problem.
func (x *exchange) fail(o Outcome, p *Problem) {
	x.ev.Outcome, x.ev.Status = o, p.Status
	x.m.cfg.ErrorWriter(x.cw.w, x.req(), p)
}

// pass hands the request to the handler unprotected.
func (x *exchange) pass(next http.Handler) {
	start := x.now()
	cw := &x.cw
	cw.init(0, nil)
	returned := false
	defer func() { // also when the handler panicked
		x.ev.HandlerTime = x.since(start)
		cw.close()
		x.ev.Status = cw.sent(!returned)
	}()
	next.ServeHTTP(cw, x.req())
	returned = true
}

// buffer returns x's encoding buffer, emptied.
func (x *exchange) buffer() []byte {
	if x.buf == nil {
		x.buf = bufPool.Get().(*[]byte)
	}
	return (*x.buf)[:0]
}

// end emits the event and returns what x borrowed.
func (x *exchange) end() {
	if x.m.cfg.OnEvent != nil {
		x.m.cfg.OnEvent(x.ev)
	}
	x.cw.close()
	if x.buf != nil {
		putBuffer(x.buf)
		x.buf = nil
	}
}

// headerValue is h.Get(name) for a name in canonical form, which it need
// not canonicalise again.
func headerValue(h http.Header, name string) string {
	if v := h[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// bodyReader is the request body the handler reads: the bytes already read.
type bodyReader struct{ bytes.Reader }

func (*bodyReader) Close() error { return nil }

// readAll reads body, in one allocation when its length is known and at
// most preallocMax, and stops after max+1 bytes (max bytes if max is
// math.MaxInt64).
func readAll(body io.Reader, length, max int64) ([]byte, error) {
	if length < 0 || length > max || length > preallocMax {
		b, err := io.ReadAll(io.LimitReader(body, max+min(1, math.MaxInt64-max)))
		if err == nil && int64(len(b)) < min(length, max) {
			err = io.ErrUnexpectedEOF // shorter than announced
		}
		return b, err
	}
	b := make([]byte, length, length+1)
	if _, err := io.ReadFull(body, b); err != nil {
		return nil, err
	}
	// A body longer than announced: read on to find out how much.
	if n, _ := body.Read(b[length : length+1]); n > 0 {
		rest, err := io.ReadAll(io.LimitReader(body, max-length))
		return append(b[:length+1], rest...), err
	}
	return b, nil
}

// preallocMax is the largest body length readAll allocates for before
// reading: a length announced by the client is no promise of bytes to come.
const preallocMax = 1 << 20

// detachedContext is its parent's values without its deadline and
// cancellation, as context.WithoutCancel gives, in a struct the exchange
// holds rather than an allocation of its own.
type detachedContext struct{ parent context.Context }

func (detachedContext) Deadline() (time.Time, bool) { return time.Time{}, false }
func (detachedContext) Done() <-chan struct{}       { return nil }
func (detachedContext) Err() error                  { return nil }
func (c *detachedContext) String() string           { return "idemhttp.detachedContext" }

// Value is the parent's value for key; for clientKey, the parent itself.
func (c *detachedContext) Value(key any) any {
	if _, ok := key.(clientKey); ok {
		return c.parent
	}
	return c.parent.Value(key)
}

// clientKey is the context key under which the handler's context of a
// protected request gives the request's own context, which ends when the
// client goes away: for the proxy to stop a response that is streamed to
// a client that left (see upstreamCall.follow).
type clientKey struct{}
