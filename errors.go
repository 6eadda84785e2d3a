package idem

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors for the outcomes and failures a caller branches on. Test
// with errors.Is; the typed errors below carry the details.
var (
	// ErrInFlight: another caller owns the key right now (*InFlightError).
	ErrInFlight = errors.New("idem: a request with this key is in flight")
	// ErrMismatch: the key is bound to a different request (*MismatchError).
	ErrMismatch = errors.New("idem: key reused with a different request")
	// ErrStaleToken: the lease passed to Commit, FailPermanent,
	// FailTransient or Heartbeat is not the current one (the key was taken
	// over, settled or has expired). Nothing was changed.
	ErrStaleToken = errors.New("idem: lease is no longer held (stale token)")
	// ErrNotFound: no live record for the key.
	ErrNotFound = errors.New("idem: no record for key")
	// ErrUnavailable: the store could not be reached or failed. The call may
	// be retried. A networked store may have applied the write before the
	// failure (a lost reply): see Store.
	ErrUnavailable = errors.New("idem: store unavailable")
	// ErrIncompatibleState: a stored result or error no longer decodes into
	// the current type (*DecodeError). This is a bug-class error: the
	// schema changed without a drain or an adapter.
	ErrIncompatibleState = errors.New("idem: stored state is incompatible with the current type")
	// ErrInvalidPayload: a request or result payload is not valid JSON.
	ErrInvalidPayload = errors.New("idem: payload is not valid JSON")
	// ErrPayloadTooLarge: a payload exceeds the store's limit
	// (*PayloadTooLargeError).
	ErrPayloadTooLarge = errors.New("idem: payload too large")
	// ErrInvalidFingerprint: a zero or malformed fingerprint.
	ErrInvalidFingerprint = errors.New("idem: invalid fingerprint")
	// ErrInvalidOptions: a per-call option is out of range (a negative
	// BeginOpts.Retention or Lease). Nothing was changed.
	ErrInvalidOptions = errors.New("idem: invalid options")
	// ErrInvalidArgument: a programming error in a call of this package's
	// API, such as a nil Store, a nil function, a zero Typed or an Owner
	// without a lease. It is returned (or, by Owner.Run, set as Owner.Err)
	// instead of a panic, before anything runs or is sent to a store.
	ErrInvalidArgument = errors.New("idem: invalid argument")
	// ErrNotRecorded is in the error of Do when fn ran but its outcome, a
	// result or a permanent failure, may not have been recorded: the
	// store refused or failed the write (its own error is wrapped
	// beside), or a heartbeat panicked and nothing was written. The
	// effect may have happened, and the key is released, so a retry runs
	// fn again; unless the lease had been lost (ErrStaleToken), when what
	// the new owner records stands, or the store applied a write whose
	// reply was lost, when the record stands and the retry replays it.
	// In a caller's transaction, such an error must roll back: an outcome
	// committed without its record would be done again by the retry.
	ErrNotRecorded = errors.New("idem: outcome not recorded")
)

// notRecordedError is the error of a settle call that could not record an
// outcome: it reads as the store's error, prefixed with what was not
// recorded, and is ErrNotRecorded as well as the store's error.
type notRecordedError struct {
	what string // "result not recorded", "recording the failure", "nothing recorded"
	err  error
}

func (e *notRecordedError) Error() string        { return "idem: " + e.what + ": " + e.err.Error() }
func (e *notRecordedError) Unwrap() error        { return e.err }
func (e *notRecordedError) Is(target error) bool { return target == ErrNotRecorded }

// InFlightError reports an InFlight outcome as an error.
type InFlightError struct {
	// RetryAfter is how long until the owner's lease expires.
	RetryAfter time.Duration
}

func (e *InFlightError) Error() string {
	return fmt.Sprintf("idem: a request with this key is in flight; retry after %s", e.RetryAfter)
}

// Is reports true for ErrInFlight.
func (e *InFlightError) Is(target error) bool { return target == ErrInFlight }

// MismatchError reports a Mismatch outcome as an error.
type MismatchError struct {
	// RecordedHash is the fingerprint of the request the key was first
	// used with; SubmittedHash that of the request just made.
	RecordedHash  Fingerprint
	SubmittedHash Fingerprint
	// RecordedRequest is the first request's payload as its store keeps
	// it: the same JSON value on every store, but not always the same
	// bytes (pgstore keeps JSONB, which reorders members and adds spaces).
	// Compare it as JSON, not as bytes.
	RecordedRequest []byte
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("idem: key reused with a different request (recorded %s, submitted %s)", e.RecordedHash, e.SubmittedHash)
}

// Is reports true for ErrMismatch.
func (e *MismatchError) Is(target error) bool { return target == ErrMismatch }

// DecodeError reports that a stored value no longer decodes into the
// current Go type.
type DecodeError struct {
	// What is "result", "request" or "error".
	What string
	Err  error
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("idem: stored %s does not decode into the current type: %v", e.What, e.Err)
}

// Unwrap returns the decoder's error.
func (e *DecodeError) Unwrap() error { return e.Err }

// Is reports true for ErrIncompatibleState.
func (e *DecodeError) Is(target error) bool { return target == ErrIncompatibleState }

// PayloadTooLargeError reports a payload over a store's limit.
type PayloadTooLargeError struct {
	// What is "request" or "result" (or "error").
	What  string
	Size  int
	Limit int
}

func (e *PayloadTooLargeError) Error() string {
	return fmt.Sprintf("idem: %s payload is %d bytes, the limit is %d", e.What, e.Size, e.Limit)
}

// Is reports true for ErrPayloadTooLarge.
func (e *PayloadTooLargeError) Is(target error) bool { return target == ErrPayloadTooLarge }

// Unavailable wraps err, a failure to reach or use a store's backend, so
// that errors.Is(result, ErrUnavailable) holds while errors.Is and errors.As
// still see err. It returns nil for nil. Backends use it; callers test for
// ErrUnavailable.
func Unavailable(err error) error {
	if err == nil {
		return nil
	}
	return &unavailableError{err: err}
}

type unavailableError struct{ err error }

func (e *unavailableError) Error() string        { return "idem: store unavailable: " + e.err.Error() }
func (e *unavailableError) Unwrap() error        { return e.err }
func (e *unavailableError) Is(target error) bool { return target == ErrUnavailable }

// PanicError is a panic recovered on a goroutine of this package's own,
// where it would otherwise crash the process: in a Store's Heartbeat, which
// KeepAlive, Do and Owner.Run call from a timer's goroutine, or in
// KeepAlive's lost callback, called from there too. It carries the panic's
// value and the stack of the goroutine that panicked. Do and Owner.Run
// report a Heartbeat's as an error wrapping both it and ErrLeaseLost;
// KeepAlive's stop panics with it (see KeepAlive). A Heartbeat or a lost
// that ends its goroutine (runtime.Goexit) instead of returning is
// reported so too.
type PanicError struct {
	// Op names what panicked: "Store.Heartbeat" or "KeepAlive's lost".
	Op string
	// Value is what it panicked with.
	Value any
	// Stack is the stack of the goroutine that panicked, as
	// runtime/debug.Stack reports it.
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("idem: %s panicked: %v", e.Op, e.Value) }

// Unwrap returns the panic's value when it is an error, or nil.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}
