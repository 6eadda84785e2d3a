package idem

import (
	"bytes"
	"context"
	"encoding/json"
	"time"
)

// TypedOpts configure a Typed store. A nil *TypedOpts means defaults.
type TypedOpts struct {
	// Marshal encodes requests and results. Defaults to json.Marshal. Use a
	// custom encoder to keep request fingerprints stable across versions of
	// the Req type (project it to a stable shape).
	Marshal func(v any) ([]byte, error)
	// Unmarshal decodes stored results and requests. Defaults to
	// json.Unmarshal, or to a decoder that rejects unknown fields when Strict
	// is set.
	Unmarshal func(data []byte, v any) error
	// Strict makes the default decoder reject unknown fields, so a stored
	// result with fields the current Res lacks is ErrIncompatibleState
	// instead of being silently dropped.
	Strict bool
	// Limits bound the canonical-JSON parse of request fingerprints.
	Limits *CanonicalLimits
}

// Typed is a typed view of a Store: requests of type Req, results of type
// Res, both stored as JSON. The request fingerprint is the canonical JSON of
// the encoded Req.
//
// Decode failures are bug-class and distinct: a stored result that no
// longer decodes into Res fails Begin with a *DecodeError
// (errors.Is(err, ErrIncompatibleState)); a recorded request that no longer
// decodes into Req on Mismatch is not fatal: the outcome is still Mismatch,
// with RecordedRequestErr set.
//
// A Typed is safe for concurrent use if its Store is.
type Typed[Req, Res any] struct {
	store     Store
	marshal   func(any) ([]byte, error)
	unmarshal func([]byte, any) error
	limits    *CanonicalLimits
}

// NewTyped returns a typed view of s.
func NewTyped[Req, Res any](s Store, opts *TypedOpts) *Typed[Req, Res] {
	t := &Typed[Req, Res]{store: s, marshal: json.Marshal, unmarshal: json.Unmarshal}
	if opts == nil {
		return t
	}
	if opts.Marshal != nil {
		t.marshal = opts.Marshal
	}
	switch {
	case opts.Unmarshal != nil:
		t.unmarshal = opts.Unmarshal
	case opts.Strict:
		t.unmarshal = strictUnmarshal
	}
	t.limits = opts.Limits
	return t
}

func strictUnmarshal(data []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	return d.Decode(v)
}

// Store returns the underlying raw store.
func (t *Typed[Req, Res]) Store() Store { return t.store }

// TypedOutcome is the typed answer of Typed.Begin; see Outcome.
type TypedOutcome[Req, Res any] struct {
	Kind      Kind
	Lease     Lease
	TakenOver bool
	Result    Res
	Error     *StoredError

	RecordedHash    Fingerprint
	SubmittedHash   Fingerprint
	RecordedRequest Req
	// RecordedRequestErr is a *DecodeError when the recorded request no
	// longer decodes into Req (RecordedRequest is then the zero Req).
	RecordedRequestErr error

	RetryAfter time.Duration

	recordedRequest []byte // the recorded request as the store returned it
}

// Err is like Outcome.Err; a *MismatchError carries the recorded request
// as the store returned it.
func (o TypedOutcome[Req, Res]) Err() error {
	return Outcome{Kind: o.Kind, Error: o.Error, RecordedHash: o.RecordedHash, SubmittedHash: o.SubmittedHash,
		RecordedRequest: o.recordedRequest, RetryAfter: o.RetryAfter}.Err()
}

// Request encodes req and fingerprints it, as Begin does.
func (t *Typed[Req, Res]) Request(req Req) (Request, error) {
	payload, err := t.marshal(req)
	if err != nil {
		return Request{}, err
	}
	fp, err := FingerprintJSON(payload, t.limits)
	if err != nil {
		return Request{}, err
	}
	return Request{Fingerprint: fp, Payload: payload}, nil
}

// Begin is Store.Begin with typed values.
func (t *Typed[Req, Res]) Begin(ctx context.Context, key Key, req Req, opts *BeginOpts) (TypedOutcome[Req, Res], error) {
	r, err := t.Request(req)
	if err != nil {
		return TypedOutcome[Req, Res]{}, err
	}
	o, err := t.store.Begin(ctx, key, r, opts)
	if err != nil {
		return TypedOutcome[Req, Res]{}, err
	}
	out := TypedOutcome[Req, Res]{
		Kind: o.Kind, Lease: o.Lease, TakenOver: o.TakenOver, Error: o.Error,
		RecordedHash: o.RecordedHash, SubmittedHash: o.SubmittedHash, RetryAfter: o.RetryAfter,
	}
	switch o.Kind {
	case PriorResult:
		if err := t.unmarshal(o.Result, &out.Result); err != nil {
			return TypedOutcome[Req, Res]{}, &DecodeError{What: "result", Err: err}
		}
	case Mismatch:
		out.recordedRequest = o.RecordedRequest
		if err := t.unmarshal(o.RecordedRequest, &out.RecordedRequest); err != nil {
			var zero Req
			out.RecordedRequest = zero
			out.RecordedRequestErr = &DecodeError{What: "request", Err: err}
		}
	}
	return out, nil
}

// Commit encodes res and commits it.
func (t *Typed[Req, Res]) Commit(ctx context.Context, key Key, lease Lease, res Res) error {
	b, err := t.marshal(res)
	if err != nil {
		return err
	}
	return t.store.Commit(ctx, key, lease, b)
}

// FailPermanent records err (converted by ErrorOf) as the key's outcome.
func (t *Typed[Req, Res]) FailPermanent(ctx context.Context, key Key, lease Lease, err error) error {
	return t.store.FailPermanent(ctx, key, lease, ErrorOf(err))
}

// FailTransient releases the key.
func (t *Typed[Req, Res]) FailTransient(ctx context.Context, key Key, lease Lease) error {
	return t.store.FailTransient(ctx, key, lease)
}
