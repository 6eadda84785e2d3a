package idem

import (
	"fmt"
	"time"
)

// Kind says which of the five outcomes Begin reached.
type Kind uint8

// Outcome kinds. The zero Kind is invalid.
const (
	// Fresh: the caller owns the key and must settle it.
	Fresh Kind = iota + 1
	// PriorResult: the key was committed with the same request; replay.
	PriorResult
	// PriorError: the key failed permanently with the same request; replay.
	PriorError
	// Mismatch: the key is bound to another request; reject.
	Mismatch
	// InFlight: another caller owns the key right now; retry later.
	InFlight
)

var kindNames = [...]string{"invalid", "fresh", "prior_result", "prior_error", "mismatch", "in_flight"}

// String returns the snake_case name of k, as used in logs and metrics.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Outcome is the answer of Begin. Kind says which fields are set.
type Outcome struct {
	Kind Kind

	// Lease is the reservation, when Kind is Fresh.
	Lease Lease
	// TakenOver is true when Kind is Fresh and an expired reservation of
	// another owner was taken over.
	TakenOver bool

	// Result is the committed result, byte-identical to what was committed,
	// when Kind is PriorResult.
	Result []byte

	// Error is the stored error, when Kind is PriorError.
	Error *StoredError

	// RecordedHash, SubmittedHash and RecordedRequest describe a Mismatch:
	// the fingerprint on record, the one just submitted, and the request
	// payload on record.
	RecordedHash    Fingerprint
	SubmittedHash   Fingerprint
	RecordedRequest []byte

	// RetryAfter, when Kind is InFlight, is how long until the current
	// lease expires: a good time for the caller to try again.
	RetryAfter time.Duration
}

// Err turns the outcomes a caller cannot proceed with into errors: a
// *StoredError for PriorError, a *MismatchError (ErrMismatch) for Mismatch
// and an *InFlightError (ErrInFlight) for InFlight. Fresh and PriorResult
// give nil.
func (o Outcome) Err() error {
	switch o.Kind {
	case Fresh, PriorResult:
		return nil
	case PriorError:
		if o.Error == nil {
			return &StoredError{Class: "unknown"}
		}
		e := *o.Error
		return &e
	case Mismatch:
		return &MismatchError{RecordedHash: o.RecordedHash, SubmittedHash: o.SubmittedHash, RecordedRequest: o.RecordedRequest}
	case InFlight:
		return &InFlightError{RetryAfter: o.RetryAfter}
	default:
		return fmt.Errorf("idem: invalid outcome kind %d", o.Kind)
	}
}

// Decide is the decision every backend makes when Begin finds a live record
// (one whose expires_at is after now). It returns the outcome for a caller
// submitting fp, and takeover=true when the caller may take the record over:
// an in-progress record with the same fingerprint whose lease has expired.
// In that case the backend writes the takeover itself (fence+1, new token and
// lease) and answers Fresh; the returned Outcome is then meaningless.
//
// The Outcome shares rec's Result, Request and Error: a backend whose rec
// is the record it keeps copies them before returning the Outcome (see
// Store, Buffers).
//
// Backends that decide inside the database (SQL, Lua) must give the same
// answers; the conformance suite checks that they do.
func Decide(rec *Record, fp Fingerprint, now time.Time) (o Outcome, takeover bool) {
	if rec.Fingerprint != fp {
		return Outcome{Kind: Mismatch, RecordedHash: rec.Fingerprint, SubmittedHash: fp, RecordedRequest: rec.Request}, false
	}
	switch rec.Status {
	case StatusCommitted:
		return Outcome{Kind: PriorResult, Result: rec.Result}, false
	case StatusFailed:
		return Outcome{Kind: PriorError, Error: rec.Error}, false
	default:
		if !now.Before(rec.LeaseExpiresAt) {
			return Outcome{}, true
		}
		return Outcome{Kind: InFlight, RetryAfter: rec.LeaseExpiresAt.Sub(now)}, false
	}
}
