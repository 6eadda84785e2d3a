package idemhttp

import "net/http"

// Profile selects the conventions the middleware follows.
type Profile int

const (
	// ProfileIETF follows the IETF draft: a reused key with another request
	// is 422; 5xx, 408, 409, 425 and 429 responses are not stored (the key
	// is released and a retry runs again). The default.
	ProfileIETF Profile = iota
	// ProfileStripe follows Stripe's published semantics: a reused key with
	// another request is 400, and every response that reached the handler is
	// stored, 5xx included (except 409 and 429, which mean the request did
	// not run). Refusals that a retry cannot change are written as Stripe
	// writes its errors (WriteStripeError), so that Stripe's client
	// libraries decode them and do not retry them.
	ProfileStripe
)

func (p Profile) mismatchStatus() int {
	if p == ProfileStripe {
		return http.StatusBadRequest
	}
	return http.StatusUnprocessableEntity
}

// stores reports whether the profile records a response with status.
func (p Profile) stores(status int) bool {
	switch status {
	case http.StatusConflict, http.StatusTooManyRequests:
		return false
	}
	if p == ProfileStripe {
		return true
	}
	switch status {
	case http.StatusRequestTimeout, http.StatusTooEarly:
		return false
	}
	return status < 500
}
