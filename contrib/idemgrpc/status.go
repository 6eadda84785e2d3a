package idemgrpc

import (
	"fmt"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"
)

// ErrorDomain is the domain of the google.rpc.ErrorInfo detail the
// interceptor's own errors carry; its Reason is one of the Reason…
// constants. Clients branch on the reason, as HTTP clients do on idemhttp's
// problem types.
const ErrorDomain = "github.com/idemgo/idem"

// Reasons of the interceptor's errors, in their google.rpc.ErrorInfo
// detail. They are stable.
const (
	ReasonKeyMissing       = "IDEMPOTENCY_KEY_MISSING"       // InvalidArgument
	ReasonKeyInvalid       = "IDEMPOTENCY_KEY_INVALID"       // InvalidArgument
	ReasonKeyUnsupported   = "IDEMPOTENCY_KEY_UNSUPPORTED"   // Unimplemented: a key on a protected streaming method (NewStream)
	ReasonKeyReused        = "IDEMPOTENCY_KEY_REUSED"        // FailedPrecondition
	ReasonInProgress       = "REQUEST_IN_PROGRESS"           // Aborted, with RetryInfo
	ReasonStoreUnavailable = "IDEMPOTENCY_STORE_UNAVAILABLE" // Unavailable, with RetryInfo
	ReasonInternal         = "IDEMPOTENCY_INTERNAL"          // Internal
)

// statusError builds an error of the interceptor: code and message, an
// ErrorInfo with reason and, when retryAfter is positive, a RetryInfo.
func statusError(c codes.Code, reason, msg string, retryAfter time.Duration) error {
	details := []protoadapt.MessageV1{&errdetails.ErrorInfo{Reason: reason, Domain: ErrorDomain}}
	if retryAfter > 0 {
		details = append(details, &errdetails.RetryInfo{RetryDelay: durationpb.New(retryAfter)})
	}
	st, err := status.New(c, msg).WithDetails(details...)
	if err != nil { // never for these details and codes; the status alone still says it all
		return status.Error(c, msg)
	}
	return st.Err()
}

// retryDelay rounds d up to whole seconds, at least one, as idemhttp's
// Retry-After does.
func retryDelay(d time.Duration) time.Duration {
	s := (d + time.Second - 1) / time.Second
	if s < 1 {
		s = 1
	}
	return s * time.Second
}

func errKeyMissing() error {
	return statusError(codes.InvalidArgument, ReasonKeyMissing,
		"idempotency-key metadata missing: this method requires one", 0)
}

func errKeyInvalid(detail string) error {
	return statusError(codes.InvalidArgument, ReasonKeyInvalid, "idempotency-key metadata invalid: "+detail, 0)
}

// errKeyUnsupported is the error of a streaming call that carries a key
// (see NewStream): Unimplemented, gRPC's code for an operation "not
// supported or not enabled", here protection, which a retry cannot get
// either. Not InvalidArgument, since the key may be well-formed; not
// FailedPrecondition, since no change of state would make it work.
func errKeyUnsupported() error {
	return statusError(codes.Unimplemented, ReasonKeyUnsupported,
		"idempotency-key not supported on streaming methods: the call was not run; call again without the key to run it unprotected", 0)
}

// errKeyReused is FailedPrecondition: the call is well-formed (not
// InvalidArgument) but the key is already bound to another request, state
// that retrying cannot change (not Aborted or Unavailable, which invite a
// retry), and nothing was created (not AlreadyExists, which clients read
// as "the entity exists"). The message says nothing of the original call.
func errKeyReused() error {
	return statusError(codes.FailedPrecondition, ReasonKeyReused,
		"idempotency-key reused with a different request: this key was first used with another method or request message; use a new key for a new request", 0)
}

// pushbackMetadata is the trailer with which a server tells gRPC's own
// retries how many milliseconds to wait (gRFC A6).
const pushbackMetadata = "grpc-retry-pushback-ms"

// storeRetryDelay is the retry delay a call answered "store unavailable"
// is given.
const storeRetryDelay = time.Second

// errInProgress is the error of a call whose key is in flight; d is the
// retry delay, from retryDelay.
func errInProgress(d time.Duration) error {
	return statusError(codes.Aborted, ReasonInProgress,
		fmt.Sprintf("a call with this idempotency-key is in progress; retry after %s", d), d)
}

func errStoreUnavailable() error {
	return statusError(codes.Unavailable, ReasonStoreUnavailable,
		"idempotency store unavailable: the call was not run; retry it later with the same key", storeRetryDelay)
}

func errInternal(msg string) error {
	return statusError(codes.Internal, ReasonInternal, "idemgrpc: "+msg, 0)
}
