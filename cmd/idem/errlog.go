package main

import (
	"fmt"
	"log"
	"strings"
	"sync"
	"time"

	"github.com/idemgo/idem/idemhttp"
)

// errorReporter logs the errors requests meet (a store that is down, a
// record that does not read) without flooding the log when every request
// meets one: the first goes out at once, then at most one line per every,
// saying how many were left out. Those left out are reported when the
// interval ends, with the last of them, also when no error follows (a
// burst, then the store back), and by flush, which the proxy calls on its
// way out: a count is never lost. Each report is one line: the request's
// path is logged escaped. The proxy has one for the errors of requests and
// one for those of its upstream (see Write).
type errorReporter struct {
	logger *log.Logger
	every  time.Duration
	now    func() time.Time

	mu      sync.Mutex
	next    time.Time   // no line before this
	skipped int         // errors not logged since the last line
	last    string      // the last of those, as its line would read
	pending *time.Timer // reports the skipped at next; nil when none is armed
}

func newErrorReporter(logger *log.Logger) *errorReporter {
	return &errorReporter{logger: logger, every: 10 * time.Second, now: time.Now}
}

// report is a middleware OnEvent: it logs e's error, if any.
func (r *errorReporter) report(e idemhttp.Event) {
	if e.Err == nil {
		return
	}
	// The path as the client escaped it: decoded, a %0A in it would
	// start a line of the client's making in the log.
	r.line(fmt.Sprintf("%s %s: %s: %v", e.Request.Method, e.Request.URL.EscapedPath(), e.Outcome, e.Err))
}

// Write logs p, one line of a log.Logger writing into r (with no prefix or
// flags: r's logger adds its own), as report logs an error: the proxy's
// upstream errors, one per request while the upstream is down, go through
// it.
func (r *errorReporter) Write(p []byte) (int, error) {
	r.line(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// line logs msg now, or counts it among those left out until the interval
// ends.
func (r *errorReporter) line(msg string) {
	r.mu.Lock()
	now := r.now()
	if now.Before(r.next) {
		r.skipped++
		r.last = msg
		if r.pending == nil {
			r.pending = time.AfterFunc(r.next.Sub(now), r.intervalEnded)
		}
		r.mu.Unlock()
		return
	}
	skipped := r.skipped
	r.skipped, r.last, r.next = 0, "", now.Add(r.every)
	r.mu.Unlock()
	if skipped > 0 {
		msg += fmt.Sprintf(" (and %d more errors since the last report)", skipped)
	}
	r.logger.Print(msg)
}

// intervalEnded reports the errors left out in the interval just ended,
// if an error since has not already carried their count; that report
// opens a new interval.
func (r *errorReporter) intervalEnded() {
	r.mu.Lock()
	r.pending = nil
	msg := r.takeSkipped()
	if msg != "" {
		r.next = r.now().Add(r.every)
	}
	r.mu.Unlock()
	if msg != "" {
		r.logger.Print(msg)
	}
}

// flush reports at once the errors left out and not yet reported, if
// any: for the proxy on its way out.
func (r *errorReporter) flush() {
	r.mu.Lock()
	if r.pending != nil {
		r.pending.Stop()
		r.pending = nil
	}
	msg := r.takeSkipped()
	r.mu.Unlock()
	if msg != "" {
		r.logger.Print(msg)
	}
}

// takeSkipped is the line reporting the errors left out, "" when none
// was, and forgets them; r.mu is held.
func (r *errorReporter) takeSkipped() string {
	n, last := r.skipped, r.last
	r.skipped, r.last = 0, ""
	switch n {
	case 0:
		return ""
	case 1:
		return "1 more error since the last report, the last: " + last
	}
	return fmt.Sprintf("%d more errors since the last report, the last: %s", n, last)
}
