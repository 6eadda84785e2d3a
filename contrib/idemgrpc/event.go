package idemgrpc

import (
	"time"

	"google.golang.org/grpc/codes"
)

// Event describes one protected call the interceptor handled, or one
// streaming call the stream interceptor refused (see NewStream), for
// metrics and logs.
type Event struct {
	// FullMethod is the method called, "/package.Service/Method".
	FullMethod string
	// Outcome says what happened; see the Outcome constants.
	Outcome Outcome
	// Code is the status code the client reads. For a handler's answer,
	// that is its status's code, or Internal when a trailer
	// grpc-status-details-bin the handler set carries a status of another
	// code (see the package doc), on the first call and on replays alike;
	// for a call passed through unprotected, it is the handler's status's
	// code, whatever trailer the handler set. A failure of the transport
	// once the interceptor has returned (metadata over the client's
	// header list limit, say) is not seen.
	Code codes.Code
	// StoreTime is the time spent in store calls.
	StoreTime time.Duration
	// HandlerTime is the time spent in the handler (zero unless it ran).
	HandlerTime time.Duration
	// Err is the store error, for OutcomeStoreError and for failures to
	// record or release (OutcomeReleased with Err set), why a recorded
	// response could not be replayed, or the failure (an invalid scope, or
	// a panic, which goes on) of Config.KeyScope, for OutcomeInternal.
	Err error
}

// Outcome classifies a call in an Event. The values are those of
// idemhttp.Outcome, so that HTTP and gRPC metrics can share dashboards.
type Outcome string

// Outcomes of Event.
const (
	OutcomePassThrough Outcome = "pass_through" // no key and none required
	OutcomeExecuted    Outcome = "executed"     // the handler ran and its outcome was recorded
	OutcomeReleased    Outcome = "released"     // the handler ran; its outcome was not recorded
	OutcomeReplayed    Outcome = "replayed"     // answered from the record
	OutcomeInProgress  Outcome = "in_progress"  // Aborted: the original is still running
	OutcomeMismatch    Outcome = "mismatch"     // FailedPrecondition: key reused with another request
	OutcomeKeyMissing  Outcome = "key_missing"
	OutcomeKeyInvalid  Outcome = "key_invalid"    // InvalidArgument; Unimplemented for a key on a protected stream
	OutcomeStoreError  Outcome = "store_error"    // Unavailable, or passed through with FailOpen
	OutcomeInternal    Outcome = "internal_error" // Internal: Config.KeyScope failed, or the request cannot be fingerprinted
)
