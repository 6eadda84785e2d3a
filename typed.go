package idem

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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
// Encoding failures are ErrInvalidPayload: a Req that does not encode, or
// whose encoding is not JSON the fingerprint accepts, fails Begin and
// Request; a Res that does not encode fails Commit (nothing is sent to the
// store). The encoder's error stays visible to errors.Is and errors.As.
//
// A Typed does not settle or extend what Begin reserves: after Fresh, the
// caller must call exactly one of Commit, FailPermanent or FailTransient
// (a reservation left unsettled answers InFlight until its lease lapses),
// and work that may outlast the lease (BeginOpts.Lease, else the store's,
// 30 seconds by default) must extend it with KeepAlive, or another Begin
// takes the key over and the late Commit fails with ErrStaleToken. Do does
// both.
//
// Build a Typed with NewTyped. A Typed without a Store (NewTyped(nil, …),
// the zero Typed or a nil *Typed) fails every call that needs the store
// (Begin, Commit, FailPermanent, FailTransient) with ErrInvalidArgument
// instead of panicking; its Request encodes with the defaults (a nil
// *Typed's fails with ErrInvalidArgument too).
//
// A Typed is safe for concurrent use if its Store is.
type Typed[Req, Res any] struct {
	store     Store
	marshal   func(any) ([]byte, error)
	unmarshal func([]byte, any) error
	limits    *CanonicalLimits
}

// NewTyped returns a typed view of s. A nil s, or a nil pointer of a store
// type (as a constructor returns with its error), gives a Typed whose calls
// fail with ErrInvalidArgument.
func NewTyped[Req, Res any](s Store, opts *TypedOpts) *Typed[Req, Res] {
	if IsNilStore(s) {
		s = nil
	}
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

// Store returns the underlying raw store (nil for a nil *Typed).
func (t *Typed[Req, Res]) Store() Store {
	if t == nil {
		return nil
	}
	return t.store
}

// ready reports ErrInvalidArgument for a Typed without a store.
func (t *Typed[Req, Res]) ready() error {
	if t == nil || t.store == nil {
		return fmt.Errorf("%w: Typed without a Store (build it with NewTyped and a Store)", ErrInvalidArgument)
	}
	return nil
}

// encode encodes v with the configured encoder (json.Marshal in the zero
// Typed); a failure is ErrInvalidPayload.
func (t *Typed[Req, Res]) encode(what string, v any) ([]byte, error) {
	marshal := t.marshal
	if marshal == nil {
		marshal = json.Marshal
	}
	b, err := marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: the %s does not encode: %w", ErrInvalidPayload, what, err)
	}
	return b, nil
}

// decode decodes data with the configured decoder (json.Unmarshal in the
// zero Typed).
func (t *Typed[Req, Res]) decode(data []byte, v any) error {
	if t.unmarshal == nil {
		return json.Unmarshal(data, v)
	}
	return t.unmarshal(data, v)
}

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

// Request encodes req and fingerprints it, as Begin does. An encoding that
// fails, or is not JSON within the limits, is ErrInvalidPayload (and the
// canonical-JSON error, such as ErrJSONTooDeep).
func (t *Typed[Req, Res]) Request(req Req) (Request, error) {
	if t == nil {
		return Request{}, t.ready()
	}
	payload, err := t.encode("request", req)
	if err != nil {
		return Request{}, err
	}
	fp, err := FingerprintJSON(payload, t.limits)
	if err != nil {
		return Request{}, fmt.Errorf("%w: the request: %w", ErrInvalidPayload, err)
	}
	return Request{Fingerprint: fp, Payload: payload}, nil
}

// Begin is Store.Begin with typed values. It fails with the store's
// errors, with ErrInvalidPayload when req does not encode, and with a
// *DecodeError (ErrIncompatibleState) when a PriorResult no longer decodes
// into Res; a recorded request that no longer decodes on Mismatch is
// reported in RecordedRequestErr instead.
func (t *Typed[Req, Res]) Begin(ctx context.Context, key Key, req Req, opts *BeginOpts) (TypedOutcome[Req, Res], error) {
	if err := t.ready(); err != nil {
		return TypedOutcome[Req, Res]{}, err
	}
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
		if err := t.decode(o.Result, &out.Result); err != nil {
			return TypedOutcome[Req, Res]{}, &DecodeError{What: "result", Err: err}
		}
	case Mismatch:
		out.recordedRequest = o.RecordedRequest
		if err := t.decode(o.RecordedRequest, &out.RecordedRequest); err != nil {
			var zero Req
			out.RecordedRequest = zero
			out.RecordedRequestErr = &DecodeError{What: "request", Err: err}
		}
	}
	return out, nil
}

// Commit encodes res and commits it. A res that does not encode is
// ErrInvalidPayload, and nothing is sent to the store: the reservation is
// still held, to be settled otherwise.
func (t *Typed[Req, Res]) Commit(ctx context.Context, key Key, lease Lease, res Res) error {
	if err := t.ready(); err != nil {
		return err
	}
	b, err := t.encode("result", res)
	if err != nil {
		return err
	}
	return t.store.Commit(ctx, key, lease, b)
}

// FailPermanent records err (converted by ErrorOf) as the key's outcome.
// A nil err is refused with ErrInvalidArgument, and nothing is written.
func (t *Typed[Req, Res]) FailPermanent(ctx context.Context, key Key, lease Lease, err error) error {
	if err := t.ready(); err != nil {
		return err
	}
	if err == nil {
		return fmt.Errorf("%w: Typed.FailPermanent with a nil error (nothing failed)", ErrInvalidArgument)
	}
	return t.store.FailPermanent(ctx, key, lease, ErrorOf(err))
}

// FailTransient releases the key.
func (t *Typed[Req, Res]) FailTransient(ctx context.Context, key Key, lease Lease) error {
	if err := t.ready(); err != nil {
		return err
	}
	return t.store.FailTransient(ctx, key, lease)
}
