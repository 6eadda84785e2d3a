package idemhttp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idemgo/idem"
)

// Tx is one request's transaction in transaction mode (Config.BeginTx).
// The middleware ends it exactly once, with Commit or Rollback, also when
// a panic goes through it (a Tx that BeginTx returns with an error is
// rolled back); the handler must not end it (see "Transaction mode" in
// the package documentation).
//
// With pgx, Commit and Rollback are tx.Commit and tx.Rollback; with
// database/sql, wrap tx.Commit() and tx.Rollback().
type Tx struct {
	// Store is the store bound to the transaction, e.g. pgstore's
	// store.WithTx(tx) or sqlitestore's. Required.
	Store idem.Store
	// Context is the handler's context, carrying the transaction for the
	// handler (as a context value of the caller's). Nil: the request's,
	// detached from the client's cancellation. BeginTx's request is
	// already detached, so a Context derived from it is too; its own
	// deadline, if BeginTx sets one, stays.
	Context context.Context
	// Commit commits the transaction. Required.
	Commit func(context.Context) error
	// Rollback rolls it back. Required.
	Rollback func(context.Context) error
}

// serveTx serves, in transaction mode, a request whose key, body and
// fingerprint (req) were checked.
func (x *exchange) serveTx(next http.Handler, key idem.Key, req idem.Request) {
	start := x.now()
	tx, err := x.beginTx()
	x.ev.StoreTime += x.since(start)
	if err != nil {
		x.storeFailed(next, err) // FailOpen is refused with BeginTx: 503
		return
	}
	t := &openTx{Tx: tx}
	defer func() {
		if !t.ended { // a panic went through: the store's, the handler's, the configuration's
			x.rollback(t)
		}
	}()
	call := x.storeCtx()
	o, err := tx.Store.Begin(call.ctx, key, req, x.m.beginOpts)
	x.done(call)
	if err == nil && o.Kind == idem.Fresh && o.Lease.Token == "" {
		err = fmt.Errorf("idemhttp: %T.Begin answered Fresh without a lease", tx.Store)
	}
	if err != nil || o.Kind != idem.Fresh {
		x.rollback(t)
		if err != nil {
			x.storeFailed(next, err)
			return
		}
		if o.Kind == idem.InFlight {
			// The key is held by another open transaction, not a lease,
			// and transactions are short: retry soon.
			o.RetryAfter = min(o.RetryAfter, time.Second)
		}
		x.answer(o)
		return
	}
	x.runTx(next, key, o.Lease, t)
}

// openTx is a request's transaction, which the middleware ends once: by
// Commit, or by Rollback (also when a panic goes through serveTx).
type openTx struct {
	*Tx
	ended bool
}

// beginTx is Config.BeginTx's transaction for x's request, checked.
func (x *exchange) beginTx() (*Tx, error) {
	tx, err := x.callBeginTx()
	switch {
	case err != nil:
		err = fmt.Errorf("idemhttp: Config.BeginTx: %w", err)
	case tx == nil:
		return nil, errors.New("idemhttp: Config.BeginTx returned no Tx")
	case tx.Commit == nil || tx.Rollback == nil || tx.Store == nil || idem.IsNilStore(tx.Store):
		err = errors.New("idemhttp: Config.BeginTx returned a Tx without its Store, Commit or Rollback")
	default:
		return tx, nil
	}
	if tx != nil && tx.Rollback != nil { // begun, then refused
		x.rollback(&openTx{Tx: tx})
	}
	return nil, err
}

// callBeginTx calls Config.BeginTx with x's request, detached from the
// client's cancellation. One that read the body leaves the handler the
// whole body all the same.
func (x *exchange) callBeginTx() (*Tx, error) {
	defer x.panicked("Config.BeginTx")
	defer func() { _, _ = x.body.Seek(0, io.SeekStart) }()
	return x.m.cfg.BeginTx(x.req().WithContext(x.ctx()))
}

// rollback rolls t back unless it has ended, noting a failure in x's
// event. It reports whether t was rolled back by this call: false when
// it had ended or Tx.Rollback failed (the handler may have committed t
// itself, and what it wrote with it).
func (x *exchange) rollback(t *openTx) bool {
	if t.ended {
		return false
	}
	t.ended = true
	call := x.storeCtx()
	err := t.Rollback(call.ctx)
	x.done(call)
	if err != nil && x.ev.Err == nil {
		x.ev.Err = fmt.Errorf("idemhttp: Tx.Rollback: %w", err)
	}
	return err == nil
}

// runTx runs the handler as the owner of key in tx, its response held,
// and then commits the record and tx and delivers the response, or rolls
// tx back and answers what is true.
func (x *exchange) runTx(next http.Handler, key idem.Key, lease idem.Lease, t *openTx) {
	x.lendBody()
	client := x.cw.w
	held := &heldResponse{header: client.Header().Clone(), client: client, capture: &x.cw}
	if held.header == nil {
		held.header = http.Header{}
	}
	cw := &x.cw
	cw.w = held
	cw.init(x.m.cfg.MaxCapture, &x.m.cfg)
	// The body is delivered whole, after the commit: a Flush does not
	// make the response streaming. The body the capture keeps is the one
	// held for the client.
	cw.recording, cw.head, cw.whole, cw.held = true, x.req().Method == http.MethodHead, true, true
	cw.outside()
	// BeginTx's request was detached from the client's cancellation, and
	// so is a Tx.Context derived from it; its own deadline stays.
	ctx := x.ctx()
	if t.Context != nil {
		ctx = t.Context
	}

	// What a panic in the handler leaves: t rolled back (by serveTx).
	x.ev.Outcome = OutcomeReleased
	start := x.now()
	returned := false
	defer func() {
		if !returned {
			cw.w = client
			x.ev.HandlerTime = x.since(start)
			x.ev.Status = http.StatusInternalServerError // what a recovering middleware outside answers
			if held.passed {
				x.ev.Status = held.status // its head went out before the panic
			}
		}
	}()
	next.ServeHTTP(cw, x.req().WithContext(ctx))
	returned = true
	x.ev.HandlerTime = x.since(start)
	cw.finish(x.req())
	cw.w = client

	rec, ok := x.record()
	if !ok {
		rolledBack := x.rollback(t)
		if cw.status >= 400 { // the handler's failure, which is the truth
			x.deliver(held, cw.status)
			return
		}
		if x.ev.Err == nil {
			x.ev.Err = fmt.Errorf("idemhttp: the handler's %d response could not be recorded (over Config.MaxCapture, Unrecorded, not stored by the profile or Config.StoreStatus, or not as long as its Content-Length); its transaction was rolled back", cw.status)
		}
		detail := "The response could not be recorded, and the request was rolled back: it had no effect."
		if !rolledBack {
			// Tx.Rollback failed (its error is in the event): the handler
			// may have committed the transaction itself.
			detail = "The response could not be recorded, and the request's transaction could not be rolled back: what the request did may have been committed."
		}
		x.fail(OutcomeReleased, &Problem{Type: ProblemInternal, Title: "Response not recorded", Status: http.StatusInternalServerError, Detail: detail})
		return
	}
	call := x.storeCtx()
	err := t.Store.Commit(call.ctx, key, lease, rec)
	x.done(call)
	unknown := false // whether the commit took effect
	// endedBefore says the store refused the record (not for want of
	// the database, nor of time: a connection lost or cut takes the
	// transaction with it), and yet the transaction would not roll back:
	// the handler ended it itself, committing what it wrote, maybe.
	endedBefore := false
	if err != nil {
		endedBefore = !x.rollback(t) && !errors.Is(err, idem.ErrUnavailable) &&
			!errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled)
	} else {
		t.ended = true
		call = x.storeCtx()
		if err = t.Commit(call.ctx); err != nil {
			unknown = call.ctx.Err() != nil // cut short: it may have committed
			err = fmt.Errorf("idemhttp: Tx.Commit: %w", err)
		}
		x.done(call)
	}
	if err != nil {
		x.ev.Err = err
		switch {
		case errors.Is(err, idem.ErrInvalidArgument) || endedBefore:
			// The store found the transaction ended, or it would not roll
			// back: the handler committed or rolled it back itself, so
			// what it wrote may be committed, and with it the key's
			// reservation.
			x.fail(OutcomeInternal, &Problem{Type: ProblemInternal, Title: "Transaction ended by the handler", Status: http.StatusInternalServerError,
				Detail: "The request's transaction was ended before its response could be recorded: what the request did may have been committed."})
		case cw.status >= 400:
			// The handler's failure (after a statement that failed and
			// aborted the transaction, say) is the truth, recorded or not.
			x.ev.Outcome = OutcomeReleased
			x.deliver(held, cw.status)
		case errors.As(err, new(*idem.PayloadTooLargeError)):
			// Larger than the store records, however often it is retried:
			// as for a response over MaxCapture.
			x.fail(OutcomeReleased, &Problem{Type: ProblemInternal, Title: "Response not recorded", Status: http.StatusInternalServerError,
				Detail: "The response is larger than the idempotency store records, and the request was rolled back: it had no effect."})
		case unknown:
			x.fail(OutcomeStoreError, &Problem{Type: ProblemStoreUnavailable, Title: "Idempotency store unavailable", Status: http.StatusServiceUnavailable,
				Detail: "The request's transaction did not confirm its commit in time: it may or may not have taken effect. Retry it with the same key: if it did, the retry is answered from its record.", RetryAfter: time.Second})
		default:
			x.fail(OutcomeStoreError, &Problem{Type: ProblemStoreUnavailable, Title: "Idempotency store unavailable", Status: http.StatusServiceUnavailable,
				Detail: "The request's transaction could not be committed: it was rolled back and had no effect. Retry it later with the same key.", RetryAfter: time.Second})
		}
		return
	}
	x.deliver(held, cw.status)
	x.ev.Outcome = OutcomeExecuted
}

// deliver writes the held response, status and all, to the client: its
// header as it was when the status was written, the trailers as the
// handler left them, after the body (but for an HTTP/1 response of a
// declared length), and a Content-Length when the handler set none (and
// there are no trailers). Of a response already passed on (see
// heldResponse.Write), only the trailers are left to set.
func (x *exchange) deliver(held *heldResponse, status int) {
	x.ev.Status = status
	if held.passed {
		held.setTrailers()
		return
	}
	held.setHead()
	h := held.client.Header()
	// Over HTTP/1, a response of a declared Content-Length (or
	// Transfer-Encoding identity) is not chunked and ends without
	// trailers, as net/http sends it and as it is recorded (see
	// capture.finish).
	if (x.req().ProtoMajor >= 2 || !x.cw.unchunked) && held.setTrailers() {
		delete(h, "Content-Length")
	} else if _, ok := h["Content-Length"]; !ok && bodyAllowed(status) && x.req().Method != http.MethodHead {
		h["Content-Length"] = []string{strconv.Itoa(len(held.body()))}
	}
	held.client.WriteHeader(status)
	_, _ = held.client.Write(held.body())
}

// heldResponse is the writer under a handler's capture in transaction
// mode: it holds the whole response, nothing reaching the client before
// the transaction ends, but for a failure that cannot be recorded (see
// Write). Its body is the one the capture keeps to record (see body).
// Informational (1xx) responses other than 101 are dropped; Flush does
// nothing; Hijack is not supported (it has no Hijack method, so
// http.ResponseController's fails with http.ErrNotSupported).
type heldResponse struct {
	header http.Header
	status int
	// sent is the header as it was when the status was written, which
	// net/http would have sent (later changes count only for trailers).
	sent http.Header
	// client is the client's writer, for deadlines only; capture is the
	// capture over this writer, which says when the body outgrew what can
	// be recorded.
	client  http.ResponseWriter
	capture *capture
	// passed says the response is being passed on to the client as it
	// is written (see Write): its head and the body held so far are sent.
	passed bool
}

func (h *heldResponse) Header() http.Header { return h.header }

func (h *heldResponse) WriteHeader(code int) {
	if code < 100 || code > 999 {
		// As net/http panics, in the handler: its transaction is rolled
		// back rather than committed with a status no replay could send.
		panic(fmt.Sprintf("invalid WriteHeader code %v", code))
	}
	if h.status == 0 && (code >= 200 || code == http.StatusSwitchingProtocols) { // informational ones dropped
		h.status, h.sent = code, h.header.Clone()
	}
}

func (h *heldResponse) Write(p []byte) (int, error) {
	if h.status == 0 {
		h.WriteHeader(http.StatusOK)
	}
	if !h.capture.abandoned || h.status < 400 {
		// Held by the capture, which kept p; or not recordable, so
		// answered 500 and never sent: not held.
		return len(p), nil
	}
	// A failure that cannot be recorded: its transaction is rolled back
	// whatever follows, and the client gets it as written (see runTx), so
	// it is passed on now rather than held whole.
	if !h.passed {
		if err := h.pass(); err != nil {
			return 0, err
		}
	}
	return h.client.Write(p)
}

// body is the body held: what the capture kept, which, once it abandoned
// the recording, is the body written before (see capture.held).
func (h *heldResponse) body() []byte { return h.capture.body }

// pass sends the client the response's head and the body held so far; the
// rest of the body follows as it is written, the trailers when the handler
// returned (see deliver).
func (h *heldResponse) pass() error {
	h.passed = true
	h.setHead()
	h.setTrailers() // those already set; net/http sends them after the body
	h.client.WriteHeader(h.status)
	_, err := h.client.Write(h.body())
	return err
}

// setHead sets the client's header to the response's as it was when its
// status was written, without the trailers it declared; a response passed
// on keeps their declaration (the Trailer field), for net/http to send
// them after a body whose end it does not know yet.
func (h *heldResponse) setHead() {
	client := h.client.Header()
	clear(client)
	sent := h.sentHeader()
	declared := declaredTrailers(nil, sent)
	for k, v := range sent {
		if (k != "Trailer" || h.passed) && !slices.Contains(declared, k) && !strings.HasPrefix(k, http.TrailerPrefix) {
			client[k] = v
		}
	}
}

// sentHeader is the header as it was when the status was written, or as
// it is when none was.
func (h *heldResponse) sentHeader() http.Header {
	if h.sent == nil {
		return h.header
	}
	return h.sent
}

// setTrailers sets in the client's header, as net/http sends them after
// the body, the trailers the handler declared (when it wrote its status)
// and set, and those it set with http.TrailerPrefix. It reports whether
// there are any.
func (h *heldResponse) setTrailers() bool {
	client := h.client.Header()
	declared := declaredTrailers(nil, h.sentHeader())
	any := false
	for k, v := range h.header {
		switch {
		case slices.Contains(declared, k):
			client[http.TrailerPrefix+k], any = v, true
		case strings.HasPrefix(k, http.TrailerPrefix):
			client[k], any = v, true
		}
	}
	return any
}

// SetReadDeadline, SetWriteDeadline and EnableFullDuplex act on the
// client's connection, as in lease mode (http.ResponseController finds
// them); they send nothing.
func (h *heldResponse) SetReadDeadline(t time.Time) error {
	return http.NewResponseController(h.client).SetReadDeadline(t)
}

func (h *heldResponse) SetWriteDeadline(t time.Time) error {
	return http.NewResponseController(h.client).SetWriteDeadline(t)
}

func (h *heldResponse) EnableFullDuplex() error {
	return http.NewResponseController(h.client).EnableFullDuplex()
}

// FlushError does nothing while the response is held, and flushes the
// client's writer once it is passed on (see Write).
func (h *heldResponse) FlushError() error {
	if h.passed {
		return http.NewResponseController(h.client).Flush()
	}
	return nil
}
