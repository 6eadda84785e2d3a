package idemhttp

import (
	"bufio"
	"bytes"
	"net"
	"net/http"
)

// capture passes a response through to the client while keeping a copy of
// it, up to a cap, for recording. Flush and Hijack mark the response as
// streaming: it is still delivered, but not recorded.
type capture struct {
	w           http.ResponseWriter
	max         int
	allow       []string // the headers to record, canonical
	status      int
	header      []headerField
	body        bytes.Buffer
	wroteHeader bool
	overflow    bool // the body outgrew max
	streaming   bool // Flush or Hijack was called
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
	c.header = replayable(c.w.Header(), c.allow)
	c.w.WriteHeader(code)
}

func (c *capture) Write(p []byte) (int, error) {
	if !c.wroteHeader {
		c.WriteHeader(http.StatusOK)
	}
	if !c.overflow && !c.streaming {
		if c.body.Len()+len(p) > c.max {
			c.overflow = true
			c.body = bytes.Buffer{}
		} else {
			c.body.Write(p)
		}
	}
	return c.w.Write(p)
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
		c.header = replayable(c.w.Header(), c.allow)
	}
}

// recordable reports whether the response can be recorded at all.
func (c *capture) recordable() bool { return !c.overflow && !c.streaming }
