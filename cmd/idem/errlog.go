package main

import (
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/idemgo/idem/idemhttp"
)

// errorReporter logs the errors requests meet (a store that is down, a
// record that does not read) without flooding the log when every request
// meets one: the first goes out at once, then at most one line per every,
// saying how many were left out. Each report is one line: the request's
// path is logged escaped.
type errorReporter struct {
	logger *log.Logger
	every  time.Duration
	now    func() time.Time

	mu      sync.Mutex
	next    time.Time // no line before this
	skipped int       // errors not logged since the last line
}

func newErrorReporter(logger *log.Logger) *errorReporter {
	return &errorReporter{logger: logger, every: 10 * time.Second, now: time.Now}
}

// report is a middleware OnEvent: it logs e's error, if any.
func (r *errorReporter) report(e idemhttp.Event) {
	if e.Err == nil {
		return
	}
	r.mu.Lock()
	now := r.now()
	if now.Before(r.next) {
		r.skipped++
		r.mu.Unlock()
		return
	}
	skipped := r.skipped
	r.skipped, r.next = 0, now.Add(r.every)
	r.mu.Unlock()
	// The path as the client escaped it: decoded, a %0A in it would
	// start a line of the client's making in the log.
	msg := fmt.Sprintf("%s %s: %s: %v", e.Request.Method, e.Request.URL.EscapedPath(), e.Outcome, e.Err)
	if skipped > 0 {
		msg += fmt.Sprintf(" (and %d more errors since the last report)", skipped)
	}
	r.logger.Print(msg)
}
