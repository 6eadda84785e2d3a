package idemhttp_test

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemgo/idem/idemhttp"
)

// wantErrorAnswer checks the status of w, an error answer, its
// Content-Type ct and its Cache-Control: no-store.
func wantErrorAnswer(t *testing.T, w *httptest.ResponseRecorder, status int, ct string) {
	t.Helper()
	if w.Code != status {
		t.Fatalf("status = %d, want %d; body %s", w.Code, status, w.Body)
	}
	if got := w.Header().Get("Content-Type"); got != ct {
		t.Errorf("Content-Type = %q, want %s", got, ct)
	}
	if cc := w.Header().Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control = %q, want no-store", cc)
	}
}

// wantStripeError checks that w is an error written as Stripe's API writes
// them, of type typ.
func wantStripeError(t *testing.T, w *httptest.ResponseRecorder, status int, typ string) {
	t.Helper()
	wantErrorAnswer(t, w, status, "application/json")
	if sr := w.Header().Get("Stripe-Should-Retry"); sr != "false" {
		t.Errorf("Stripe-Should-Retry = %q, want false", sr)
	}
	var body struct {
		Error *struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || body.Error == nil {
		t.Fatalf("body %q: %v; want a Stripe error", w.Body, err)
	}
	if body.Error.Type != typ || body.Error.Message == "" {
		t.Errorf("error = %+v, want type %s and a message", *body.Error, typ)
	}
}

// TestStripeProfileErrors: under ProfileStripe the middleware writes the
// refusals a retry cannot change as Stripe's API writes its errors, which
// Stripe's client libraries decode and do not retry: a key reused with
// another request is a 400 idempotency_error naming the key; an invalid
// key and a body too large are invalid_request_error. A request in
// progress (409) and a store down (503), which those libraries retry, stay
// problem details; so does every answer of a Config.ErrorWriter given.
func TestStripeProfileErrors(t *testing.T) {
	b := setup(t, idemhttp.Config{Profile: idemhttp.ProfileStripe, MaxBody: 64})
	b.do(t, "POST", "/x", `{"a":1}`, key("k"))
	w := b.do(t, "POST", "/x", `{"a":2}`, key("k"))
	wantStripeError(t, w, 400, "idempotency_error")
	if !strings.Contains(w.Body.String(), "'k'") {
		t.Errorf("idempotency_error %s does not name the key", w.Body)
	}
	wantStripeError(t, b.do(t, "POST", "/x", `{}`, key(strings.Repeat("k", 300))), 400, "invalid_request_error")
	wantStripeError(t, b.do(t, "POST", "/x", `{"a":"`+strings.Repeat("x", 100)+`"}`, key("big")), 413, "invalid_request_error")

	held := setup(t, idemhttp.Config{Profile: idemhttp.ProfileStripe})
	held.up.hold, held.up.started = make(chan struct{}), make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		held.do(t, "POST", "/x", `{}`, key("held"))
	}()
	<-held.up.started
	wantProblem(t, held.do(t, "POST", "/x", `{}`, key("held")), 409, idemhttp.ProblemInProgress)
	close(held.up.hold)
	<-done

	own := setup(t, idemhttp.Config{Profile: idemhttp.ProfileStripe, ErrorWriter: idemhttp.WriteProblem})
	own.do(t, "POST", "/x", `{"a":1}`, key("k"))
	wantProblem(t, own.do(t, "POST", "/x", `{"a":2}`, key("k")), 400, idemhttp.ProblemKeyReused)
}
