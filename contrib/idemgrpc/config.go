package idemgrpc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/idemgo/idem"
)

// Metadata names.
const (
	// KeyMetadata is the incoming metadata that carries the key, in the
	// syntax of the HTTP Idempotency-Key header (idem.ParseHeader).
	KeyMetadata = "idempotency-key"
	// ReplayedMetadata is the response header metadata, with the value
	// "true", that marks a response answered from a record.
	ReplayedMetadata = "idempotent-replayed"
)

// DefaultMaxCapture is the largest response message or error status
// recorded unless Config.MaxCapture says otherwise, in bytes of its wire
// form.
const DefaultMaxCapture = 1 << 20

// DefaultNamespace is the namespace of the interceptor's records unless
// Config.Namespace says otherwise.
var DefaultNamespace = idem.MustNamespace("grpc")

// statusDetailsMetadata is the trailer that carries a status's details.
// gRPC sends the one a handler sets when the status it answers with has
// no details of its own, and a client then reads its status from it (or
// Internal, when its code is not the answer's): so is it recorded and
// replayed, whatever Config.ReplayMetadata says, for the retry to read
// the same status.
const statusDetailsMetadata = "grpc-status-details-bin"

// neverReplayed are metadata names never recorded, which
// Config.ReplayMetadata may not name: credentials, cookies, the
// transport's own metadata and the key and replay markers.
var neverReplayed = map[string]bool{
	"authorization": true, "proxy-authorization": true, "cookie": true, "set-cookie": true,
	"content-type": true, "user-agent": true, "te": true, "host": true,
	ReplayedMetadata: true, KeyMetadata: true,
}

// Config configures the interceptor. Only Store is required.
type Config struct {
	// Store keeps the records. Required.
	Store idem.Store
	// Namespace of the records. Defaults to DefaultNamespace ("grpc").
	Namespace idem.Namespace
	// Protect reports whether a method, by its full name
	// ("/package.Service/Method"), is protected; other methods pass through
	// untouched, with or without a key. It must be safe for concurrent use.
	// Defaults to ProtectUnlessIdempotent.
	Protect func(fullMethod string) bool
	// RequireKey makes a protected unary call without a key fail with
	// codes.InvalidArgument. Defaults to false: such calls pass through and
	// nothing is recorded. It does not apply to streams (see NewStream).
	RequireKey bool
	// KeyScope returns the scope of a call's key, from the incoming
	// context, so that callers cannot see or probe each other's records.
	// A scope is at most 128 bytes of UTF-8 without control characters
	// (idem.Key.WithScope): any other fails the call with codes.Internal
	// before the handler runs. Defaults to ScopeByAuthorization.
	KeyScope func(ctx context.Context) string
	// StoreCode decides which outcomes of the handler are recorded and
	// replayed, by their status code (codes.OK for a response); the key of
	// any other outcome is released, so that a retry runs the handler again.
	// Codes gRPC does not define (over codes.Unauthenticated, 16) are never
	// recorded. Defaults to DefaultStoreCode.
	StoreCode func(codes.Code) bool
	// ReplayMetadata are the names of the header and trailer metadata the
	// handler sets (grpc.SetHeader, grpc.SendHeader, grpc.SetTrailer) that
	// are recorded and replayed, compared case-insensitively. Binary
	// ("-bin") metadata is kept byte for byte. Defaults to none.
	// Credentials, cookies, transport metadata (content-type, user-agent,
	// te, host) and the key and replay markers are never recorded. A name
	// that is one of them, that is not a valid metadata name (":" names
	// among them), or that starts with "grpc-" (gRPC's own metadata, never
	// recorded), is refused: New returns an error. The trailer
	// grpc-status-details-bin is recorded without being named, when gRPC
	// sends it, since a client reads its status from it (see the package
	// doc).
	ReplayMetadata []string
	// NewResponse, when set, returns an empty response message of the
	// method fullMethod, into which a recorded response is decoded on
	// replay. When it is nil or returns nil (or a nil pointer), the
	// method's output type is looked up in protoregistry.GlobalFiles and
	// GlobalTypes, and failing that the type recorded with the response in
	// GlobalTypes. Set it for
	// services whose descriptors and response types are not registered
	// there. A message of another type than the one recorded is not
	// decoded into: the retry gets codes.Internal (IDEMPOTENCY_INTERNAL),
	// as after a deploy that changed the method's response type. The same
	// look-up gives the type of the empty message recorded when the
	// handler returns no message (nil) and no error. For a response type of
	// the original protobuf API (no ProtoReflect method), return
	// protoadapt.MessageV2Of(new(T)); the replay is a *T.
	NewResponse func(fullMethod string) proto.Message
	// MaxCapture is the largest response or error status recorded, in
	// bytes of its wire form (for an error, its google.rpc.Status with the
	// message and details); larger ones are delivered but not recorded
	// (the key is released, and a retry runs the handler again). Defaults
	// to DefaultMaxCapture (1 MiB). A record holds the message or status
	// in base64, with its type and the metadata recorded: above about
	// 3 MiB (gRPC's default limit on a message is 4 MiB), raise the
	// store's MaxPayload (idem.DefaultMaxPayload, 4 MiB) to 4/3 of
	// MaxCapture and room for the metadata, or the Commit of an outcome
	// that large fails, and it is delivered but not recorded after all.
	MaxCapture int
	// Retention is how long records are kept. Defaults to the store's.
	Retention time.Duration
	// Lease is how long a call owns its key before a retry may take it
	// over; it is extended while the handler runs. Defaults to the store's.
	Lease time.Duration
	// StoreTimeout, when positive, bounds each store call (the Begin before
	// the handler, the Commit or release after it). Defaults to no bound of
	// the interceptor's own: configure timeouts on the store's client. The
	// calls are never cancelled by the client going away.
	StoreTimeout time.Duration
	// FailOpen passes calls through unprotected when the store fails.
	// Defaults to false: fail closed with codes.Unavailable.
	FailOpen bool
	// OnEvent, when set, is called once per protected unary call, and once
	// per streaming call the stream interceptor refuses (NewStream),
	// before the interceptor returns. It must be safe for concurrent use.
	OnEvent func(Event)

	// replay is ReplayMetadata lower-cased, without the never-replayed
	// names, as a set; replayTrailer is replay and the trailer
	// grpc-status-details-bin.
	replay, replayTrailer map[string]bool
	// scopeByAuthorization is set when KeyScope defaulted to
	// ScopeByAuthorization, which the interceptor then computes from the
	// incoming metadata it has already read.
	scopeByAuthorization bool
}

func (c *Config) validate() error {
	if c.Store == nil {
		return errors.New("idemgrpc: Config.Store is required")
	}
	if idem.IsNilStore(c.Store) {
		// A store constructor's result kept although it failed: every
		// call would panic in the store.
		return fmt.Errorf("idemgrpc: Config.Store is a nil %T (was its constructor's error ignored?)", c.Store)
	}
	if c.Namespace == "" {
		c.Namespace = DefaultNamespace
	}
	if err := c.Namespace.Validate(); err != nil {
		return fmt.Errorf("idemgrpc: Config.Namespace: %w", err)
	}
	switch {
	case c.MaxCapture < 0:
		return errors.New("idemgrpc: Config.MaxCapture must not be negative")
	case c.Retention < 0:
		return errors.New("idemgrpc: Config.Retention must not be negative")
	case c.Lease < 0:
		return errors.New("idemgrpc: Config.Lease must not be negative")
	case c.StoreTimeout < 0:
		return errors.New("idemgrpc: Config.StoreTimeout must not be negative")
	}
	if c.Protect == nil {
		c.Protect = ProtectUnlessIdempotent
	}
	if c.KeyScope == nil {
		c.KeyScope, c.scopeByAuthorization = ScopeByAuthorization, true
	}
	if c.StoreCode == nil {
		c.StoreCode = DefaultStoreCode
	}
	if c.MaxCapture == 0 {
		c.MaxCapture = DefaultMaxCapture
	}
	c.replay, c.replayTrailer = map[string]bool{}, map[string]bool{statusDetailsMetadata: true}
	for _, name := range c.ReplayMetadata {
		n := strings.ToLower(name)
		if !validMetadataName(n) {
			return fmt.Errorf("idemgrpc: Config.ReplayMetadata: invalid metadata name %q", name)
		}
		if strings.HasPrefix(n, "grpc-") {
			// Named in the belief that it is recorded, which it never is:
			// refused rather than ignored.
			return fmt.Errorf("idemgrpc: Config.ReplayMetadata: %q is gRPC's own metadata, never recorded (grpc-status-details-bin is, without being named)", name)
		}
		if neverReplayed[n] {
			return fmt.Errorf("idemgrpc: Config.ReplayMetadata: %q is never recorded (credentials, cookies, transport metadata and the key and replay markers are not)", name)
		}
		c.replay[n], c.replayTrailer[n] = true, true
	}
	return nil
}

// validMetadataName reports whether n (lower-cased) is a metadata name
// gRPC allows: 0-9 a-z - _ and '.', not empty.
func validMetadataName(n string) bool {
	if n == "" {
		return false
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// DefaultStoreCode records responses (codes.OK) and the errors that say
// the request itself cannot succeed as sent, so that a retry gets the same
// answer: InvalidArgument, NotFound, AlreadyExists, PermissionDenied,
// FailedPrecondition and OutOfRange. The others (Canceled, Unknown,
// DeadlineExceeded, ResourceExhausted, Aborted, Internal, Unavailable,
// DataLoss, Unauthenticated, Unimplemented) release the key: they may be
// transient, and a retry runs the handler again. Unimplemented is among
// them because it is what a server answers that does not have the method
// yet (a generated Unimplemented…Server stub), as during a rolling deploy:
// a retry that reaches a newer server must run there, not be answered the
// old server's Unimplemented for the rest of the retention.
//
// Through the usual mapping of codes to HTTP statuses, this is the policy
// of idemhttp's default profile (which stores every status under 500 but
// 408, 409, 425 and 429) except for three codes: Unauthenticated (401,
// stored over HTTP) is released, as it may come of credentials that could
// not be checked for now; AlreadyExists (409, released over HTTP, where
// 409 is also the conflict that may pass) is recorded, Aborted being
// gRPC's code for that conflict; and Canceled (499, stored over HTTP) is
// released.
func DefaultStoreCode(c codes.Code) bool {
	switch c {
	case codes.OK, codes.InvalidArgument, codes.NotFound, codes.AlreadyExists, codes.PermissionDenied,
		codes.FailedPrecondition, codes.OutOfRange:
		return true
	}
	return false
}
