package durable

import (
	"errors"
	"fmt"
	"time"

	"github.com/idemgo/idem/internal/pgstorable"
)

// ErrDuplicate is what errors.Is finds in the error of an Insert whose
// correlation key is occupied by another instance. The error itself is a
// *DuplicateError, which carries that instance's id.
var ErrDuplicate = errors.New("durable: correlation key is occupied")

// ErrNoTarget is returned by Signal when its target does not exist, is
// terminal, or is a correlation key that no live instance occupies. Nothing
// is stored: a signal is never held for an instance that does not exist yet.
var ErrNoTarget = errors.New("durable: no live instance to signal")

// ErrAmbiguousTarget is returned by Signal addressed by a correlation key
// that more than one live instance carries. That can only happen with
// instances inserted with an empty correlation scope, whose keys the engine
// does not keep unique. Nothing is stored.
var ErrAmbiguousTarget = errors.New("durable: correlation key addresses more than one live instance")

// ErrNotFound is returned by Get for an id no row has (never inserted, or
// removed by garbage collection).
var ErrNotFound = errors.New("durable: no such instance")

// ErrUnknownStep is what errors.Is finds in the error handed to the error
// handling of a step whose outcome names a step the FSM does not have, and
// in the failure of an instance whose row names one.
var ErrUnknownStep = errors.New("durable: unknown step")

// ErrUnknownFSM is handed to the default error handling when a picked row
// names an FSM, or a version of it, that this engine was not configured
// with. The row is retried with backoff, so that an engine of a rolling
// deploy that has the definition can take it, and fails after the default
// maximum number of attempts.
var ErrUnknownFSM = errors.New("durable: FSM not registered with this engine")

// DuplicateError reports an Insert rejected because its correlation key is
// occupied. errors.Is(err, ErrDuplicate) is true for it.
type DuplicateError struct {
	// CorrelationKey is the key that was to be inserted.
	CorrelationKey string
	// ID is the id of the instance occupying the key, or 0 when it left the
	// key before it could be read (it terminated, or was collected, between
	// the rejected insert and the look-up; a retry may then succeed).
	ID int64
}

func (e *DuplicateError) Error() string {
	if e.ID == 0 {
		return fmt.Sprintf("durable: correlation key %q is occupied", e.CorrelationKey)
	}
	return fmt.Sprintf("durable: correlation key %q is occupied by instance %d", e.CorrelationKey, e.ID)
}

// Is reports whether target is ErrDuplicate.
func (e *DuplicateError) Is(target error) bool { return target == ErrDuplicate }

// PanicError is the error handed to the error handling when a step panics,
// or when a JSON method (MarshalJSON, MarshalText, UnmarshalJSON,
// UnmarshalText) of a value the engine encodes or decodes for the step
// panics: its state, its Done result, the state of a child it inserts.
// Insert and its relatives, Signal and InsertOrSignal return one, wrapped,
// for a state or payload whose MarshalJSON panics. What says which of these
// panicked, and so does the message: "durable: step panicked: ...",
// "durable: JSON encoding panicked: ...".
type PanicError struct {
	Value any    // what the step, or the JSON method, panicked with
	Stack []byte // the goroutine's stack at the panic
	What  string // what panicked: "step", "JSON encoding" or "JSON decoding"
}

func (e *PanicError) Error() string { return fmt.Sprintf("durable: %s panicked: %v", e.What, e.Value) }

// Unwrap returns the panic value when it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// ErrInvalidConfig is what errors.Is finds in the errors of NewFSM and
// NewClient that reject a definition or a configuration. The error itself
// is a *ConfigError, which names the field at fault.
var ErrInvalidConfig = errors.New("durable: invalid configuration")

// ConfigError reports a field of an FSMConfig or a Config that NewFSM or
// NewClient rejected. errors.Is(err, ErrInvalidConfig) is true for it.
type ConfigError struct {
	// Field names the field at fault as a Go expression: "FSMConfig.Name",
	// `FSMConfig.Steps["charge"]`, `Config.Queues["mail"].Concurrency`.
	Field string
	// Problem says what is wrong with it, as a phrase that follows the
	// field's name ("must be 1–128 bytes, got \"\"").
	Problem string
}

func (e *ConfigError) Error() string { return "durable: " + e.Field + " " + e.Problem }

// Is reports whether target is ErrInvalidConfig.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// configErrorf returns a *ConfigError for field.
func configErrorf(field, format string, args ...any) error {
	return &ConfigError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// ErrPayloadTooLarge is what errors.Is finds in the error of an Insert,
// InsertAll or Signal whose state or payload is larger than
// Config.MaxPayload, and in the error handed to the error handling of a
// step whose new state or result is. The error itself is a
// *PayloadTooLargeError.
var ErrPayloadTooLarge = errors.New("durable: payload too large")

// PayloadTooLargeError reports a JSON document larger than
// Config.MaxPayload. Nothing was written. errors.Is(err,
// ErrPayloadTooLarge) is true for it.
type PayloadTooLargeError struct {
	// What names the document: "state", "result" or "signal payload".
	What string
	// Size is the document's size, in bytes of JSON, with each number
	// counted as PostgreSQL writes it back (see checkPayload).
	Size int
	// Limit is Config.MaxPayload.
	Limit int
}

func (e *PayloadTooLargeError) Error() string {
	return fmt.Sprintf("durable: %s of %d bytes is larger than Config.MaxPayload (%d bytes)", e.What, e.Size, e.Limit)
}

// Is reports whether target is ErrPayloadTooLarge.
func (e *PayloadTooLargeError) Is(target error) bool { return target == ErrPayloadTooLarge }

// checkPayload returns a *PayloadTooLargeError when doc, encoded by
// encoding/json, is larger than limit (a limit below 1 checks no size),
// and an ErrUnstorable error when jsonb cannot store it. The size counts
// each number as jsonb writes it back, every digit spelled out
// (pgstorable.RenderedSize): 1e131071 is 8 bytes as sent and 131072 as
// read, so that a small document cannot come back from the database much
// larger than the limit, and a few of them cannot fail the claims of their
// whole queue (a claim reads a row's state and inbox as JSON, at most
// 1 GiB a value).
func checkPayload(what string, doc []byte, limit int) error {
	if limit > 0 && len(doc) > limit {
		return &PayloadTooLargeError{What: what, Size: len(doc), Limit: limit}
	}
	if err := pgstorable.JSONB(doc); err != nil {
		return fmt.Errorf("%w: %s %v", ErrUnstorable, what, err)
	}
	if limit > 0 {
		if n := pgstorable.RenderedSize(doc); n > limit {
			return &PayloadTooLargeError{What: what, Size: n, Limit: limit}
		}
	}
	return nil
}

// ErrUnstorable is what errors.Is finds in the error of a call given a
// value PostgreSQL cannot store: text that is not valid UTF-8 or holds a
// NUL character (a correlation key, a signal name…), or that is longer
// than the 2048 bytes an index of it holds (a correlation or concurrency
// key, a signal name, a dedup key), JSON holding the escape \u0000 (a
// string with a NUL in a state, result or payload) or a number beyond
// jsonb's (such as 1e131072), or a time beyond timestamptz's range
// (InsertOpts.EligibleAt, RetryOpts.At). Nothing was written. A step whose
// outcome holds one fails with it, handled like any step error.
var ErrUnstorable = errors.New("durable: value PostgreSQL cannot store")

// checkTime returns an ErrUnstorable error when timestamptz cannot store
// t.
func checkTime(what string, t time.Time) error {
	if err := pgstorable.Time(t); err != nil {
		return fmt.Errorf("%w: %s %v", ErrUnstorable, what, err)
	}
	return nil
}

// maxIndexedText is the longest text, in bytes, of the values the engine
// indexes (correlation and concurrency keys, signal names, dedup keys): a
// btree index row holds at most 2704 bytes, and a longer value that does
// not compress enough fails the statement that indexes it, which may be
// the claim that leases its row or the commit of a Children outcome, or
// never can be signalled (an Await name).
const maxIndexedText = 2048

// checkIndexed returns an ErrUnstorable error when s, which what names, is
// longer than maxIndexedText or a text column cannot store it.
func checkIndexed(what, s string) error {
	if len(s) > maxIndexedText {
		return fmt.Errorf("%w: %s is %d bytes, more than the %d an index of it holds", ErrUnstorable, what, len(s), maxIndexedText)
	}
	return checkText(what, s)
}

// checkText returns an ErrUnstorable error when a text column cannot store
// s, which what names.
func checkText(what, s string) error {
	if err := pgstorable.Text(s); err != nil {
		return fmt.Errorf("%w: %s %v", ErrUnstorable, what, err)
	}
	return nil
}

// ErrStepTimeout is what errors.Is finds in the error handed to the error
// handling of a step that failed after its FSM's StepTimeout passed and
// its context was cancelled. The error itself is a *StepTimeoutError.
var ErrStepTimeout = errors.New("durable: step timed out")

// StepTimeoutError reports a step that returned an error after its
// context was cancelled by FSMConfig.StepTimeout. errors.Is matches both
// ErrStepTimeout and the step's own error.
type StepTimeoutError struct {
	// Timeout is FSMConfig.StepTimeout.
	Timeout time.Duration
	// Err is the error the step returned.
	Err error
}

func (e *StepTimeoutError) Error() string {
	return fmt.Sprintf("durable: step timed out after %s: %v", e.Timeout, e.Err)
}

// Is reports whether target is ErrStepTimeout.
func (e *StepTimeoutError) Is(target error) bool { return target == ErrStepTimeout }

// Unwrap returns the step's error.
func (e *StepTimeoutError) Unwrap() error { return e.Err }

// ErrLeaseLost is the cause (see context.Cause) of the cancellation of a
// running step's context when its engine no longer holds its row's lease,
// or may no longer: the heartbeat found the claim gone (reaped, the
// instance cancelled, the row claimed again), or no heartbeat extended
// the lease within Config.LeaseTTL of the last one that did being sent,
// on the engine's monotonic clock (the database unreachable, or its calls
// hanging), after which another engine's reaper may take the row back and
// run the step again.
var ErrLeaseLost = errors.New("durable: lease lost while the step ran")

// ErrEngineStopping is the cause (see context.Cause) of the cancellation
// of a running step's context when its engine stops hard: Stop's context
// ended before the step returned, or Start's context was cancelled. A
// step that fails so cancelled is not charged with the failure: its row
// is handed back, runnable with its attempt unchanged, without going
// through the error handling (StepStopEvent.HandedBack).
var ErrEngineStopping = errors.New("durable: the engine is stopping")

// ErrStopInStep is what Stop returns when a step calls it with its
// context: the graceful stop has begun, and ends once the step has
// returned, which Stop cannot wait for.
var ErrStopInStep = errors.New("durable: Stop called from a step: the stop has begun, and ends after the step returns")
