package main

import (
	"bytes"
	"errors"
	"log"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/internal/syncbuf"
)

// TestErrorReporter checks that the first error is logged at once, that
// the ones after it within the interval are only counted, and that the
// next line says how many were left out; events without an error log
// nothing.
func TestErrorReporter(t *testing.T) {
	var out bytes.Buffer
	now := time.Unix(1_700_000_000, 0)
	r := newErrorReporter(log.New(&out, "", 0))
	r.now = func() time.Time { return now }
	ev := func(err error) idemhttp.Event {
		return idemhttp.Event{Request: httptest.NewRequest("POST", "/charges", nil), Outcome: idemhttp.OutcomeStoreError, Err: err}
	}
	down := errors.New("store down")
	r.report(ev(nil))
	r.report(ev(down))
	for range 3 {
		now = now.Add(time.Second)
		r.report(ev(down))
	}
	r.report(ev(nil))
	now = now.Add(10 * time.Second)
	r.report(ev(down))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{
		"POST /charges: store_error: store down",
		"POST /charges: store_error: store down (and 3 more errors since the last report)",
	}
	if len(lines) != len(want) {
		t.Fatalf("logged %q, want %q", lines, want)
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("line %d = %q, want %q", i, lines[i], want[i])
		}
	}
}

// TestErrorReporterEscapesThePath checks that a request whose path holds
// an encoded line break (%0A) is logged on one line, its path as the
// client escaped it, so that a client cannot write lines of its own
// into the log.
func TestErrorReporterEscapesThePath(t *testing.T) {
	var out bytes.Buffer
	r := newErrorReporter(log.New(&out, "", 0))
	req := httptest.NewRequest("POST", "/charges%0A2026/01/01%2000:00:00%20idem%20proxy:%20forged", nil)
	r.report(idemhttp.Event{Request: req, Outcome: idemhttp.OutcomeStoreError, Err: errors.New("store down")})
	want := "POST /charges%0A2026/01/01%2000:00:00%20idem%20proxy:%20forged: store_error: store down\n"
	if out.String() != want {
		t.Errorf("logged %q, want %q", out.String(), want)
	}
}

// TestMetricsSeparateInternalErrors checks that a request answered 500
// for a failing scope or fingerprint counts as an internal error, not as a
// store error, and that a store error still counts as one.
func TestMetricsSeparateInternalErrors(t *testing.T) {
	m := newMetrics()
	m.observe(idemhttp.Event{Outcome: idemhttp.OutcomeInternal, Err: errors.New("scope")})
	m.observe(idemhttp.Event{Outcome: idemhttp.OutcomeStoreError, Err: errors.New("down")})
	m.observe(idemhttp.Event{Outcome: idemhttp.OutcomeExecuted})
	var out bytes.Buffer
	m.write(&out)
	for _, want := range []string{"idem_store_errors_total 1\n", "idem_internal_errors_total 1\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("metrics lack %q:\n%s", want, out.String())
		}
	}
}

// TestErrorReporterReportsWhatItLeftOut checks that errors only counted
// within the interval are reported once it ends, with the last of them,
// also when no error follows to carry the count (a burst, then the store
// back), and that flush, as the proxy calls it on its way out, reports
// those not yet reported at once; with nothing left out, flush logs
// nothing.
func TestErrorReporterReportsWhatItLeftOut(t *testing.T) {
	var out syncbuf.Buffer
	r := newErrorReporter(log.New(&out, "", 0))
	r.every = 50 * time.Millisecond
	ev := func(path string) idemhttp.Event {
		return idemhttp.Event{Request: httptest.NewRequest("POST", path, nil), Outcome: idemhttp.OutcomeStoreError, Err: errors.New("store down")}
	}
	r.report(ev("/a"))
	r.report(ev("/b"))
	r.report(ev("/c"))
	want := "POST /a: store_error: store down\n2 more errors since the last report, the last: POST /c: store_error: store down\n"
	deadline := time.Now().Add(10 * time.Second)
	for out.String() != want && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := out.String(); got != want {
		t.Fatalf("after a burst: logged %q, want %q", got, want)
	}
	r.flush()
	if got := out.String(); got != want {
		t.Errorf("flush with nothing left out logged %q", strings.TrimPrefix(got, want))
	}

	var exit bytes.Buffer
	r = newErrorReporter(log.New(&exit, "", 0))
	r.report(ev("/a"))
	r.report(ev("/b"))
	r.flush()
	r.flush()
	if want := "POST /a: store_error: store down\n1 more error since the last report, the last: POST /b: store_error: store down\n"; exit.String() != want {
		t.Errorf("flush: logged %q, want %q", exit.String(), want)
	}
}
