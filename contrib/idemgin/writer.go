package idemgin

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"

	"github.com/gin-gonic/gin"
)

// unwritten is the size of a response whose header has not been sent.
const unwritten = -1

// errHijackAfterBody is returned by Hijack once body bytes were written.
var errHijackAfterBody = errors.New("idemgin: cannot hijack after the response body was written")

// writer presents the middleware's recording http.ResponseWriter to gin
// handlers as a gin.ResponseWriter, with gin's conventions: WriteHeader only
// sets the status, which is sent with the first body byte, an explicit
// WriteHeaderNow or Flush, or when the chain returns (finish). Sending the
// header late matters: the middleware records the headers as they are when
// the status is sent, and gin handlers may set headers after c.Status.
type writer struct {
	w      http.ResponseWriter // the middleware's recording writer
	outer  gin.ResponseWriter  // gin's own writer, for Pusher
	status int
	size   int
	// client is the client's request context, whose end CloseNotify
	// reports when the chain runs with it (a request the middleware passes
	// through unprotected: watched is set) or once the response streams.
	client  context.Context
	watched bool        // CloseNotify reports client's end
	closed  chan bool   // for CloseNotify
	stop    func() bool // stops reporting the end of client
	// held is set when the recording writer holds the response until the
	// middleware's transaction ends (idemhttp.Config.BeginTx): nothing is
	// sent on to gin's writer before then, which the middleware writes to
	// itself once it delivers the response.
	held bool
}

var _ gin.ResponseWriter = (*writer)(nil)

func newWriter(w http.ResponseWriter, outer gin.ResponseWriter) *writer {
	// The status starts as the one set before the middleware (c.Status in
	// an outer middleware), as gin's own writer would still hold it.
	return &writer{w: w, outer: outer, status: outer.Status(), size: unwritten}
}

func (w *writer) Header() http.Header { return w.w.Header() }

// WriteHeader sets the status to send; once the header was sent it is
// ignored, as gin does.
func (w *writer) WriteHeader(code int) {
	if code > 0 && !w.Written() {
		w.status = code
	}
}

// WriteHeaderNow sends the header unless it was sent already, on to the
// client too, as gin does: a middleware outside this one then sees the
// response written (c.AbortWithStatus, say, is not rendered over). A held
// response is not sent on: gin's writer would send its own status, before
// the transaction ends.
func (w *writer) WriteHeaderNow() {
	w.sendHeader()
	if !w.held {
		w.outer.WriteHeaderNow()
	}
}

// sendHeader passes the header to the recording writer, unless it was
// sent already.
func (w *writer) sendHeader() {
	if !w.Written() {
		w.size = 0
		w.w.WriteHeader(w.status)
	}
}

func (w *writer) Write(p []byte) (int, error) {
	w.WriteHeaderNow()
	n, err := w.w.Write(p)
	w.size += n
	return n, err
}

func (w *writer) WriteString(s string) (int, error) {
	w.WriteHeaderNow()
	n, err := io.WriteString(w.w, s)
	w.size += n
	return n, err
}

func (w *writer) Status() int { return w.status }

func (w *writer) Size() int { return w.size }

func (w *writer) Written() bool { return w.size != unwritten }

// Flush sends what was written so far. The middleware then treats the
// response as a stream: it is delivered, not recorded, and CloseNotify
// reports the client leaving from then on. A held response (transaction
// mode) is not sent: it is still recorded whole, and CloseNotify still
// does not report the client leaving, so that a c.Stream loop runs to its
// end rather than have a truncated body committed.
func (w *writer) Flush() {
	w.WriteHeaderNow()
	_ = http.NewResponseController(w.w).Flush()
	if !w.watched && !w.held {
		w.watched = true
		w.notify()
	}
}

// Hijack hands the connection to the handler; the response is not
// recorded.
func (w *writer) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if w.size > 0 {
		return nil, nil, errHijackAfterBody
	}
	w.size = 0 // nothing may be written after this, not even by finish
	return http.NewResponseController(w.w).Hijack()
}

// CloseNotify returns a channel that receives when the client goes away,
// for a request the middleware passes through unprotected (no key, none
// required; or the store failed, with Config.FailOpen), as gin's own does.
// For a protected request it receives only once the response streams
// (Flush: c.Stream and c.SSEvent flush), when it is no longer recorded:
// until then the handler runs to completion whether or not the client
// stays, and its context is not cancelled when the client goes away
// either. In transaction mode a flushed response is still held and
// recorded, so it never receives.
func (w *writer) CloseNotify() <-chan bool {
	if w.closed == nil {
		w.closed = make(chan bool, 1)
		w.notify()
	}
	return w.closed
}

// notify makes closed receive when client ends, once CloseNotify made it
// and the client is watched.
func (w *writer) notify() {
	if w.closed != nil && w.watched && w.client != nil && w.stop == nil {
		w.stop = context.AfterFunc(w.client, func() { w.closed <- true })
	}
}

// Pusher returns the server-push interface of gin's own writer, if any.
// Pushed responses are separate streams and are never recorded.
func (w *writer) Pusher() http.Pusher { return w.outer.Pusher() }

// Unwrap gives http.ResponseController access to the recording writer.
func (w *writer) Unwrap() http.ResponseWriter { return w.w }

// finish passes on the header of a response whose handlers set a status
// (or nothing) without writing a body, as gin does when its chain returns;
// gin's own writer, as when a chain returns, still waits, so that an outer
// middleware may render over it.
func (w *writer) finish() {
	w.sendHeader()
	if w.stop != nil {
		w.stop()
	}
}
