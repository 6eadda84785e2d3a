package idemhttp

import (
	"net/http"

	"github.com/idemgo/idem"
)

// WriteStripeError is the ErrorWriter of ProfileStripe, the default when
// Config.Profile is ProfileStripe and Config.ErrorWriter is nil. It writes
// the refusals that a retry of the same request cannot change (statuses
// 400-499 but 408, 409 and 429) as Stripe's API writes its errors, so that
// Stripe's client libraries decode them into their error types and do not
// retry them:
//
//	{"error":{"type":"idempotency_error","message":"Keys for idempotent requests can only be used with the same parameters they were first used with. …"}}
//
// with Content-Type application/json, Cache-Control no-store and
// Stripe-Should-Retry: false. The type is idempotency_error for a key
// reused with another request (ProblemKeyReused) and invalid_request_error
// for the others (a key missing or invalid, a body too large or
// unreadable, a request target the proxy does not forward); the message is
// p.Detail, or p.Title. The other answers (a request in progress, a body
// too slow, the store or the upstream unavailable), which those libraries
// retry by themselves, are written by WriteProblem.
func WriteStripeError(w http.ResponseWriter, r *http.Request, p *Problem) {
	switch {
	case p.Status < 400 || p.Status >= 500,
		p.Status == http.StatusRequestTimeout, p.Status == http.StatusConflict, p.Status == http.StatusTooManyRequests:
		WriteProblem(w, r, p)
		return
	}
	e := stripeError{Type: "invalid_request_error", Message: p.Detail}
	if e.Message == "" {
		e.Message = p.Title
	}
	if p.Type == ProblemKeyReused {
		e.Type = "idempotency_error"
		e.Message = "Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than " +
			"'" + r.Header.Get(idem.HeaderName) + "' if you meant to execute a different request."
	}
	w.Header().Set("Stripe-Should-Retry", "false")
	writeError(w, "application/json", p, struct {
		Error stripeError `json:"error"`
	}{e})
}

// stripeError is the object under "error" in Stripe's error responses.
type stripeError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}
