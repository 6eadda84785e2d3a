package idemhttp

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"sync"
)

// capture passes a response through to the client while keeping a copy of
// it, up to a cap, for recording. Flush and Hijack mark the response as
// streaming: it is still delivered, but not recorded.
//
// The copy of the body is kept in a pooled buffer, returned by close; like
// any ResponseWriter, a capture must not be used after the handler returned.
type capture struct {
	w           http.ResponseWriter
	max         int
	allow       []string        // the headers to record, canonical
	allowSet    map[string]bool // allow as a set
	status      int
	header      []headerField
	hdr         [4]headerField // storage of header
	body        []byte         // the body so far, in buf
	buf         *[]byte        // pooled, nil when nothing is kept
	wroteHeader bool
	overflow    bool // the body outgrew max
	streaming   bool // Flush or Hijack was called
}

// init readies c to capture up to max body bytes of a response to w, and
// the headers in allow (allowSet the same as a set).
func (c *capture) init(w http.ResponseWriter, max int, allow []string, allowSet map[string]bool) {
	c.w, c.max, c.allow, c.allowSet = w, max, allow, allowSet
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
	c.status = code
	c.header = replayable(c.hdr[:0], c.w.Header(), c.allow, c.allowSet)
	c.w.WriteHeader(code)
}

func (c *capture) Write(p []byte) (int, error) {
	if !c.wroteHeader {
		c.WriteHeader(http.StatusOK)
	}
	keep(c, p)
	return c.w.Write(p)
}

// WriteString is Write without converting s, for the writer's own
// WriteString (io.WriteString finds it).
func (c *capture) WriteString(s string) (int, error) {
	if !c.wroteHeader {
		c.WriteHeader(http.StatusOK)
	}
	keep(c, s)
	return io.WriteString(c.w, s)
}

// keep adds p to the recorded body, unless the body outgrows max or the
// response is streaming.
func keep[T []byte | string](c *capture, p T) {
	if c.overflow || c.streaming || len(p) == 0 {
		return
	}
	if len(c.body)+len(p) > c.max {
		c.overflow = true
		c.close()
		return
	}
	if c.buf == nil {
		c.buf = bufPool.Get().(*[]byte)
		c.body = (*c.buf)[:0]
	}
	c.body = append(c.body, p...)
}

// Flush delivers what was written so far and abandons the recording.
func (c *capture) Flush() {
	if !c.wroteHeader {
		c.WriteHeader(http.StatusOK)
	}
	c.streaming = true
	_ = http.NewResponseController(c.w).Flush()
}

// Hijack hands the connection to the handler and abandons the recording.
func (c *capture) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c.streaming = true
	return http.NewResponseController(c.w).Hijack()
}

// Unwrap gives http.ResponseController access to the underlying writer.
func (c *capture) Unwrap() http.ResponseWriter { return c.w }

// finish completes the capture after the handler returned.
func (c *capture) finish() {
	if !c.wroteHeader {
		c.status = http.StatusOK
		c.header = replayable(c.hdr[:0], c.w.Header(), c.allow, c.allowSet)
	}
}

// recordable reports whether the response can be recorded at all.
func (c *capture) recordable() bool { return !c.overflow && !c.streaming }

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
