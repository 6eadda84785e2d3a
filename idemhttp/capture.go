package idemhttp

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
)

// capture passes a response through to the client while keeping a copy of
// it, up to a cap, for recording. Flush and Hijack mark the response as
// streaming: it is still delivered, but not recorded.
//
// While a response is being recorded, a failed write to the client (which
// went away) is not reported to the handler: the work is done, and its
// response is recorded for the client's retry rather than cut short
// (ReverseProxy, for one, panics on a failed write, which would release the
// key).
//
// A response whose body is not as long as the Content-Length the handler
// declared is not recorded either: net/http cuts the connection after it,
// so the client got a broken response (a body cut short, say, when the
// handler's own source failed mid-copy), and its retry must run again
// rather than be answered the truncated body as if it were whole. But
// over HTTP/1 a body written whole and then written on is recorded as
// declared: net/http refuses the writes past the declared length, and
// the client got the declared body, whole.
//
// The copy of the body is kept in a pooled buffer, returned by close; like
// any ResponseWriter, a capture must not be used after the handler returned.
type capture struct {
	w      http.ResponseWriter
	max    int
	cfg    *Config // the headers recorded: its replay and replaySet; nil when not recording
	status int
	header []headerField
	hdr    [4]headerField // storage of header
	// values is the storage of the recorded header values, copied as
	// the header is sent (see take): more go to the heap. A replay,
	// which records nothing, keeps the values it sends in it instead.
	values [4]string
	// outer are the recordable headers that were set before the handler
	// ran, by middlewares outside this one (see outside).
	outer       []outerField
	body        []byte  // the body so far, in buf
	buf         *[]byte // pooled, nil when nothing is kept
	wroteHeader bool
	recording   bool // the response is to be recorded (a protected request)
	// abandoned says the response will not be recorded after all: its
	// body outgrew max, it is streaming (Flush or Hijack was called), or
	// the handler said not to (Unrecorded).
	abandoned bool
	// whole says the handler writes a body it already holds whole, so that
	// a Flush only pushes it out and does not make the response streaming
	// (the proxy sets it, as ReverseProxy flushes to send trailers).
	whole bool
	// exact says the body must be max bytes long to be recorded: the
	// handler declared that Content-Length (see declare).
	exact bool
	// head says the request is a HEAD, whose response has no body
	// whatever its Content-Length says.
	head bool
	// h1 says the writer below is net/http's HTTP/1 server, which refuses
	// a write past a declared Content-Length whole (see keep): in lease
	// mode over HTTP/1; not in transaction mode, whose held response keeps
	// every write.
	h1 bool
	// unchunked says the handler declared a Content-Length, or a
	// Transfer-Encoding of identity, as the header was written: net/http's
	// HTTP/1 server then does not chunk the body, and sends none of the
	// trailers (see finish).
	unchunked bool
	// untyped says why the response was sent without a Content-Type it
	// has none of (see untyped), as the header was written.
	untyped uint8
	// hijacked says the handler took the connection over (Hijack).
	hijacked bool
	// upgrade says the handler passes on a protocol upgrade (101) that it
	// writes on the connection it takes over: the proxy sets it.
	upgrade bool
	// held says the body kept is also the response held for the client
	// (transaction mode: see heldResponse), which abandon keeps, as it
	// was, for the client.
	held bool
	// (The flags above are kept together, to keep the exchange within
	// its size class.)

	// trailers are the trailers declared as the header was written (see
	// declaredTrailers), when recording; nil when none were (a pointer,
	// to keep the exchange within its size class).
	trailers *[]string
	// conn, when set, wraps the connection Hijack hands over: the proxy
	// sets it with upgrade (see upstreamCall.upgraded).
	conn func(net.Conn) net.Conn
}

// init readies c to capture up to max body bytes of a response to c.w,
// and the headers cfg replays (none when cfg is nil).
func (c *capture) init(max int, cfg *Config) {
	c.max, c.cfg = max, cfg
}

// replayable appends to out the headers of h that c records.
func (c *capture) replayable(out []headerField, h http.Header) []headerField {
	if c.cfg == nil {
		return out
	}
	return replayable(out, h, c.cfg.replay, c.cfg.replaySet)
}

func (c *capture) Header() http.Header { return c.w.Header() }

func (c *capture) WriteHeader(code int) {
	if c.wroteHeader {
		return
	}
	if code >= 100 && code <= 199 && code != http.StatusSwitchingProtocols {
		c.w.WriteHeader(code) // informational: passed on, not recorded
		return
	}
	c.wroteHeader = true
	c.take(code)
	c.w.WriteHeader(code)
}

// take takes in the response's header as it is sent with status, when
// recording: the recordable fields the handler set (see own), the
// trailers it declared, its framing (see unchunked), why it has no
// Content-Type (see untyped), and the Content-Length it declared (see
// declare). The values are copied (see copyValues): net/http sends them as they
// are now, whatever the handler changes in place afterwards.
func (c *capture) take(status int) {
	c.status = status
	if !c.recording {
		return
	}
	h := c.w.Header()
	c.header = c.own(c.replayable(c.hdr[:0], h))
	if len(h["Trailer"]) > 0 {
		names := declaredTrailers(nil, h)
		c.trailers = &names
	}
	n, te := declaredLength(h), headerValue(h, "Transfer-Encoding")
	c.unchunked = n >= 0 || te == "identity"
	c.untyped = untyped(h, te)
	c.declare(n)
	c.copyValues()
}

// copyValues copies the values of the header fields recorded so far into c's
// own storage, each field's a slice of it with no spare capacity, so that
// the record holds the values sent even when the handler changes them in
// place in its header afterwards (h["X"][0] = v).
func (c *capture) copyValues() {
	values := c.values[:0:len(c.values)]
	for i := range c.header {
		f := &c.header[i]
		start := len(values)
		values = append(values, f.values...)
		f.values = values[start:len(values):len(values)]
	}
}

// Why a response has no Content-Type net/http could sniff (see untyped).
const (
	sniffable = iota
	typeNil   // the handler set Content-Type to nil, which tells net/http not to sniff one
	typeByTE  // the handler set a Transfer-Encoding, which keeps net/http's HTTP/1 server from sniffing
)

// untyped says why net/http sends a response of header h, whose
// Transfer-Encoding is te, without a Content-Type though h has none to
// send, or sniffable when it sniffs one from the body.
func untyped(h http.Header, te string) uint8 {
	v, set := h["Content-Type"]
	switch {
	case len(v) > 0:
		return sniffable
	case set:
		return typeNil
	case te != "":
		return typeByTE
	}
	return sniffable
}

func (c *capture) Write(p []byte) (int, error) {
	if !c.wroteHeader {
		c.WriteHeader(http.StatusOK)
	}
	keep(c, p)
	n, err := c.w.Write(p)
	return c.delivered(n, len(p), err)
}

// WriteString is Write without converting s, for the writer's own
// WriteString (io.WriteString finds it).
func (c *capture) WriteString(s string) (int, error) {
	if !c.wroteHeader {
		c.WriteHeader(http.StatusOK)
	}
	keep(c, s)
	n, err := io.WriteString(c.w, s)
	return c.delivered(n, len(s), err)
}

// delivered is what a write of want bytes to the client returns to the
// handler, n bytes of it written with err: all of it while the response is
// being recorded (see capture), n and err otherwise.
func (c *capture) delivered(n, want int, err error) (int, error) {
	if err != nil && c.recording && !c.abandoned {
		return want, nil
	}
	return n, err
}

// keep adds p to the recorded body, unless the body outgrows max or the
// response is streaming.
func keep[T []byte | string](c *capture, p T) {
	if c.abandoned || len(p) == 0 {
		return
	}
	if len(c.body)+len(p) > c.max {
		if c.exact && c.h1 && len(c.body) == c.max {
			// Over HTTP/1, net/http refuses a write past the declared
			// Content-Length whole, and every one after it: the client
			// has the declared body, which is what is recorded. (Over
			// HTTP/2 the excess is sent, and the client reports an error.)
			return
		}
		c.abandon()
		return
	}
	if c.buf == nil {
		c.buf = bufPool.Get().(*[]byte)
		c.body = (*c.buf)[:0]
	}
	if c.exact && cap(c.body)-len(c.body) < len(p) {
		// The length is declared: one buffer of it, not one grown write
		// by write; beyond exactGrowth, a buffer twice as large, up to
		// that length, so that a response that is slow to come, or never
		// does, holds no more than twice what it wrote.
		want := c.max
		if want > exactGrowth {
			want = min(want, max(2*cap(c.body), exactGrowth, len(c.body)+len(p)))
		}
		c.body = slices.Grow(c.body, want-len(c.body))
	}
	c.body = append(c.body, p...)
}

// exactGrowth is the most a body of declared length is given room for
// ahead of its writes (see keep).
const exactGrowth = 1 << 20

// outerField is a header as it was before the handler ran: the values
// slice in the header, and a copy of the values.
type outerField struct {
	name         string
	values, copy []string
}

// outside notes the recordable headers already set before the handler
// runs: those of middlewares outside this one, which run again for a
// replay and set them again, or not, for that request (a compressor's
// Content-Encoding, set only for a client that accepts it; a request id).
// Those the handler leaves untouched are not recorded (see own).
func (c *capture) outside() {
	h := c.w.Header()
	if len(h) == 0 {
		return
	}
	for _, f := range c.replayable(nil, h) {
		c.outer = append(c.outer, outerField{name: f.name, values: f.values, copy: slices.Clone(f.values)})
	}
}

// own removes from fields, the recordable headers as the response is
// sent, those the handler left untouched since outside: the same values
// slice (not set again, not added to), holding the same values (not
// changed in place).
func (c *capture) own(fields []headerField) []headerField {
	if len(c.outer) == 0 {
		return fields
	}
	return slices.DeleteFunc(fields, func(f headerField) bool {
		i := slices.IndexFunc(c.outer, func(o outerField) bool { return o.name == f.name })
		if i < 0 {
			return false
		}
		o := c.outer[i]
		return len(o.values) == len(f.values) && &o.values[0] == &f.values[0] && slices.Equal(o.copy, f.values)
	})
}

// Flush is FlushError for http.Flusher, which has no error.
func (c *capture) Flush() { _ = c.FlushError() }

// FlushError delivers what was written so far and, unless the handler
// writes a whole body (see capture.whole), abandons the recording. It is
// what http.ResponseController.Flush calls, and it reports the failure to
// deliver as a write does (see delivered): to a streaming handler, whose
// context does not end when its client goes away, it is how it learns to
// stop.
func (c *capture) FlushError() error {
	if !c.wroteHeader {
		c.WriteHeader(http.StatusOK)
	}
	if !c.whole {
		c.abandoned = true
	}
	_, err := c.delivered(0, 0, http.NewResponseController(c.w).Flush())
	return err
}

// Hijack hands the connection to the handler and abandons the recording;
// a hijack that fails (HTTP/2, say) takes nothing over and abandons
// nothing, so that a handler falling back to a plain response has it
// recorded.
func (c *capture) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(c.w).Hijack()
	if err == nil {
		c.abandoned, c.hijacked = true, true
		if c.conn != nil {
			conn = c.conn(conn)
		}
	}
	return conn, brw, err
}

// Unwrap gives http.ResponseController access to the underlying writer.
func (c *capture) Unwrap() http.ResponseWriter { return c.w }

// sent is the status the client was sent, as Event.Status documents it:
// the status written; else, for a connection the handler took over, 101
// for an upgrade (see upgrade) or 0, no response through c; else 500 when
// the handler panicked (what a recovering middleware outside answers), or
// 200 when it returned (what net/http sends).
func (c *capture) sent(panicked bool) int {
	switch {
	case c.wroteHeader:
		return c.status
	case c.hijacked && c.upgrade:
		return http.StatusSwitchingProtocols
	case c.hijacked:
		return 0
	case panicked:
		return http.StatusInternalServerError
	}
	return http.StatusOK
}

// finish completes the capture, for request r, after the handler
// returned: the header, if the handler wrote none, and the trailers of a
// response recorded, as sent over HTTP/2 (see appendTrailers); over HTTP/1,
// none for a response of a declared Content-Length or Transfer-Encoding
// identity, or to an HTTP/1.0 request, which is not chunked and so ends
// without them. A response sent without a Content-Type that net/http did
// not sniff (see untyped) is recorded with an empty one.
func (c *capture) finish(r *http.Request) {
	h2 := r.ProtoMajor >= 2
	chunked := !c.unchunked && r.ProtoAtLeast(1, 1)
	if !c.wroteHeader {
		c.take(http.StatusOK)
	}
	if c.recording && !c.abandoned && c.cfg.replaySet["Content-Type"] && bodyAllowed(c.status) &&
		(c.untyped == typeNil || c.untyped == typeByTE && !h2) {
		// Recorded with no value, so that the replay, which has no
		// Transfer-Encoding, is not sniffed either.
		c.header = append(c.header, headerField{name: "Content-Type"})
	}
	if c.recording && !c.abandoned && (h2 || chunked) {
		var declared []string
		if c.trailers != nil {
			declared = *c.trailers
		}
		c.header = appendTrailers(c.header, c.w.Header(), declared, h2)
	}
}

// declare takes in, as the header of a recorded response is sent, the
// Content-Length the handler declared (n, or -1: see declaredLength),
// which net/http holds the body to
// (except for HEAD and for statuses without a body): the body kept may then
// be no longer than that, and must be that long to be recorded. A declared
// length over max cannot be recorded at all. For HEAD, it is the length of
// the body not sent, recorded with the header for the replay.
func (c *capture) declare(n int64) {
	if !bodyAllowed(c.status) {
		return
	}
	if c.head {
		if n >= 0 {
			c.header = append(c.header, headerField{name: "Content-Length", values: c.w.Header()["Content-Length"][:1]})
		}
		return
	}
	switch {
	case n < 0:
	case n > int64(c.max):
		c.abandon()
	default:
		c.max, c.exact = int(n), true
	}
}

// recordable reports whether the response can be recorded at all: it was
// not abandoned, and its body is as long as the Content-Length declared.
func (c *capture) recordable() bool {
	return !c.abandoned && (!c.exact || len(c.body) == c.max)
}

// declaredLength is the Content-Length in h as net/http's server reads it
// (the first value, a decimal number of 0 or more), or -1.
func declaredLength(h http.Header) int64 {
	v := h["Content-Length"]
	if len(v) == 0 || v[0] == "" {
		return -1
	}
	n, err := strconv.ParseInt(v[0], 10, 64)
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// bodyAllowed reports whether a response with status may have a body.
func bodyAllowed(status int) bool {
	return !(status >= 100 && status <= 199 || status == http.StatusNoContent || status == http.StatusNotModified)
}

// Unrecorded marks the response that w writes, for a protected request, as
// not to be recorded: it is delivered, and the key is released when the
// handler returns, so that a retry runs again, as for a status the profile
// does not store. Call it from the handler, before it returns; w is the
// ResponseWriter it was given, or one wrapping it that has an Unwrap method
// (as http.ResponseController expects). For a request the middleware does
// not record it does nothing.
func Unrecorded(w http.ResponseWriter) {
	for w != nil {
		switch x := w.(type) {
		case *capture:
			if x.recording {
				x.abandon()
			}
			return
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return
		}
	}
}

// abandon gives up the recording and, unless it is held for the client
// (see held), the body kept so far: the response is delivered, and the
// key released.
func (c *capture) abandon() {
	c.abandoned = true
	if !c.held {
		c.close()
	}
}

// close returns the body buffer to the pool.
func (c *capture) close() {
	if c.buf != nil {
		*c.buf = c.body
		putBuffer(c.buf)
		c.buf, c.body = nil, nil
	}
}

// bufPool recycles the buffers of captured bodies and of encodings.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// putBuffer returns b to bufPool unless it grew large.
func putBuffer(b *[]byte) {
	if cap(*b) <= 64<<10 {
		*b = (*b)[:0]
		bufPool.Put(b)
	}
}
