package idem

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// NewRequest builds the Request for a JSON payload: its fingerprint is
// FingerprintJSON(payload) and the payload is recorded as is. The payload
// must be a JSON document: nil or empty is not one, and gives the
// CanonicalJSON error (ErrJSONSyntax); for an operation with nothing to
// record, pass NullPayload.
func NewRequest(payload []byte) (Request, error) {
	fp, err := FingerprintJSON(payload, nil)
	if err != nil {
		return Request{}, err
	}
	return Request{Fingerprint: fp, Payload: payload}, nil
}

// CheckBegin validates the arguments of Store.Begin. Backends call it first,
// so that every backend rejects the same input with the same errors: the
// zero Key (ErrInvalidKey), a zero fingerprint (ErrInvalidFingerprint), an
// invalid or oversized payload, and negative options (ErrInvalidOptions).
func CheckBegin(key Key, req Request, opts *BeginOpts, maxPayload int) error {
	if key.IsZero() {
		return &KeyError{Kind: ErrKeyEmpty, Detail: "zero Key"}
	}
	if req.Fingerprint.IsZero() {
		return fmt.Errorf("%w: zero fingerprint", ErrInvalidFingerprint)
	}
	if opts != nil && opts.Retention < 0 {
		return fmt.Errorf("%w: BeginOpts.Retention is negative (%s)", ErrInvalidOptions, opts.Retention)
	}
	if opts != nil && opts.Lease < 0 {
		return fmt.Errorf("%w: BeginOpts.Lease is negative (%s)", ErrInvalidOptions, opts.Lease)
	}
	if req.Payload == nil {
		return nil
	}
	return CheckPayload("request", req.Payload, maxPayload)
}

// CheckPayload validates a JSON payload against a size limit (0 means
// DefaultMaxPayload): *PayloadTooLargeError when too large, ErrInvalidPayload
// when not JSON or not valid UTF-8 (which encoding/json alone would let
// through, and some databases reject).
func CheckPayload(what string, b []byte, maxPayload int) error {
	if maxPayload <= 0 {
		maxPayload = DefaultMaxPayload
	}
	if len(b) > maxPayload {
		return &PayloadTooLargeError{What: what, Size: len(b), Limit: maxPayload}
	}
	if validJSON(b) {
		return nil
	}
	// The slow checks confirm the fast one's verdict and say what is wrong.
	if !json.Valid(b) {
		var v json.RawMessage // the decoder says why: a syntax error, or nesting too deep
		return fmt.Errorf("%w: %s: %v", ErrInvalidPayload, what, json.Unmarshal(b, &v))
	}
	if !utf8.Valid(b) {
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalidPayload, what)
	}
	return nil
}

// CheckLease validates the key and lease arguments of the settle calls: the
// zero Key gives a *KeyError (ErrInvalidKey), a lease without a token
// ErrStaleToken (no reservation is held by it).
func CheckLease(key Key, lease Lease) error {
	if key.IsZero() {
		return &KeyError{Kind: ErrKeyEmpty, Detail: "zero Key"}
	}
	if lease.Token == "" {
		return fmt.Errorf("%w: empty lease token", ErrStaleToken)
	}
	return nil
}

// NullPayload is what a store records for a nil request payload. It is
// shared: neither a store nor its caller may modify it.
var NullPayload = []byte("null")

// RecordedPayload is the payload a store records for r: r.Payload, or
// NullPayload when it is nil.
func (r Request) RecordedPayload() []byte {
	if r.Payload == nil {
		return NullPayload
	}
	return r.Payload
}
