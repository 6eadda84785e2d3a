// Package idemgrpc adds Idempotency-Key semantics to unary gRPC methods: a
// retried call with the same key is answered from the recorded outcome
// instead of running twice. It is the gRPC counterpart of idemhttp.
//
//	ic, err := idemgrpc.New(idemgrpc.Config{Store: store, RequireKey: true})
//	if err != nil { … }
//	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(recovery, ic))
//
// The key travels in the incoming metadata "idempotency-key", in the
// syntax of the HTTP header (an sf-string or a raw token, 1–255 bytes; see
// idem.ParseHeader). Keys are scoped by caller (Config.KeyScope; by default
// a hash of the "authorization" metadata). A call is identified by its full
// method name and its request message in deterministic wire form (see
// below). For each call of a protected method (Config.Protect; by default
// every method not declared NO_SIDE_EFFECTS or IDEMPOTENT, nor of gRPC's
// health-checking, channelz, client status and reflection services: see
// ProtectUnlessIdempotent):
//
//   - no key: InvalidArgument when the key is required, else the call
//     passes through and nothing is recorded;
//   - an invalid key (empty, over 255 bytes, control characters, malformed
//     sf-string, several values, or sent as binary metadata
//     "idempotency-key-bin"): InvalidArgument;
//   - the same key (within the caller's scope) with another method or
//     request: FailedPrecondition, even while the original still runs. Not
//     InvalidArgument, since the call is well-formed; not Aborted or
//     Unavailable, which invite a retry that can only fail the same way;
//     not AlreadyExists, which clients read as "the entity exists". It is
//     the code gRPC gives to "rejected because of the system's state, which
//     must change first";
//   - the same key while the original runs: Aborted with a RetryInfo
//     detail (the delay in whole seconds, also in the message) and the
//     trailer grpc-retry-pushback-ms with the same delay, which gRPC's own
//     retries wait instead of their backoff: a client whose retry policy
//     lists ABORTED retries when the original may have ended, and gets its
//     replay, rather than spending its attempts while it runs;
//   - the same key after the original completed: the recorded response
//     message, or the recorded error status with its message and details,
//     plus the header metadata "idempotent-replayed: true", the header
//     and trailer metadata named in Config.ReplayMetadata, and the trailer
//     grpc-status-details-bin the handler set when gRPC sent it (below);
//   - the store unreachable: Unavailable, with a RetryInfo and a pushback
//     of one second (or pass-through with Config.FailOpen).
//
// The request's wire form is the message as the server parsed it, marshalled
// again with proto.MarshalOptions{Deterministic: true}: the order of its
// fields on the wire, the order of map entries, and a field without
// presence sent with its default value (which parses as unset) do not
// count; presence does (an optional or message field set to its default
// is not unset), and unknown fields count byte for byte, in the order they
// arrived. A message packed in a google.protobuf.Any, of a type found in
// protoregistry.GlobalTypes, counts by its content the same way, as if it
// were a field (up to 16 Anys deep); an Any of another type counts as its
// bytes. That form is stable within a build, not across builds: a deploy
// between a call and its retry that changes the request's schema (a field
// becoming known or unknown to the server) or the protobuf runtime can make
// the retry a mismatch (FailedPrecondition).
//
// The interceptor's own errors carry a google.rpc.ErrorInfo detail with
// domain ErrorDomain and one of the Reason… constants.
//
// What is recorded: responses, and the errors whose codes Config.StoreCode
// accepts (by default InvalidArgument, NotFound, AlreadyExists,
// PermissionDenied, FailedPrecondition and OutOfRange: the answers a retry
// would get again; not Unimplemented, which a retry may not get from a
// newer server). An error is recorded as gRPC sends it: one whose message
// is not valid UTF-8 with each invalid byte replaced by U+FFFD and without
// its details, which gRPC drops then. A handler that returns no message and
// no error, which gRPC answers with the empty message, is recorded as the
// empty message of the method's response type (see replay below). A
// response that does not marshal (a string field that is not valid UTF-8,
// say), which gRPC cannot send and answers with Internal "grpc: error while
// marshaling: …", is recorded as that status, the message as gRPC's
// protobuf codec words it, when Config.StoreCode accepts OK: the handler
// did its work, and the retry gets the first client's answer instead of
// doing it again. Not recorded, so a retry runs again: other codes (Unavailable,
// DeadlineExceeded, Aborted, ResourceExhausted, Internal, Unknown,
// Canceled…), an error whose status is OK (which gRPC sends without the
// response, and its client reads as Internal), responses and error
// statuses (a google.rpc.Status with its message and details) over
// Config.MaxCapture, no message where the response type cannot be found,
// outcomes whose Commit fails for good (a Commit the store answers
// idem.ErrUnavailable is made again within Config.StoreTimeout, 10
// seconds when it is not set; the
// client still gets the outcome; the key is released, or if that fails
// too stays in progress until its lease ends), and handler panics (the key is released
// and the panic goes on, to a recovery interceptor further out if there is
// one).
//
// The handler runs with a context detached from the client's cancellation
// and deadline (context.WithoutCancel): a client that goes away does not
// abort the work it started, so its retry finds the result instead of
// running again. The lease is extended in the background (idem.KeepAlive)
// while the handler runs; the handler's context is cancelled, with cause
// idem.ErrLeaseLost, only when the reservation is lost under it (taken
// over once its lease lapsed, or the store unreachable for a whole
// lease): a retry may then run the call again, so a handler should stop
// on it. For the same reason a server that stops does not cut the
// handlers of protected calls: GracefulStop waits for them, and Stop,
// which does not, fails their clients with Unavailable while the handlers
// run on and their outcomes are recorded for the retries; a process that
// exits before a handler returns leaves its key reserved until its lease
// ends (Config.Lease), and a retry after that runs the call again.
//
// Header and trailer metadata the handler sets once its client has gone
// (grpc.SetHeader, grpc.SendHeader, grpc.SetTrailer), which the stream
// then refuses, is not refused to the handler: it goes into the record when
// Config.ReplayMetadata names it, and a handler that checks those errors
// does not fail work it has done. Metadata set with the handler's context
// once the handler has returned (from a goroutine it left running) is
// refused with an Internal error, and neither sent nor recorded: each
// metadata call is either sent and recorded, or refused, so that the
// first client and the retries get the same metadata. Metadata that
// gRPC-go would send as it is but a gRPC client refuses, failing the call
// once the handler has done its work while the retry would get the
// recorded answer, is refused the same way: a name that is not a
// lower-case HTTP token (empty, or with capitals, which a metadata.MD
// literal can hold, or spaces), or a text value with control characters
// other than tab (gRPC refuses it to streaming handlers, by a stricter
// rule). To that end the handler's context
// carries a stream of the interceptor's; the experimental
// grpc.SetSendCompressor and grpc.ClientSupportedCompressors, which need
// gRPC's own, fail in the handlers of protected calls.
//
// Metadata named "grpc-…" is gRPC's own. What a handler sets of
// grpc-status and grpc-message gRPC does not send: the client reads the
// status returned, which is recorded. The trailer grpc-status-details-bin
// it does send when the status has no details of its own, and the client
// then reads its status from it (the status it carries when its code is
// the answer's, Internal otherwise): that trailer is recorded and replayed
// without being named in Config.ReplayMetadata, so that the retry reads
// the same status. Other grpc- metadata a handler sets
// (grpc-retry-pushback-ms, say) reaches the first client but is never
// recorded; Config.ReplayMetadata cannot name any grpc- metadata (New
// returns an error).
//
// A client's limit on the size of the header list it accepts
// (grpc.WithMaxHeaderListSize; lower in some clients than gRPC-go's
// default) is not the interceptor's to know. Metadata over it fails the
// call with Internal (RST_STREAM) once the handler has run, and the
// outcome is recorded all the same, as after any failure of the
// transport: the retry gets the recorded answer, with only the metadata
// named in Config.ReplayMetadata, which fails again for that client when
// it is what is over the limit. The replay's header "idempotent-replayed:
// true" takes 55 bytes of the limit (HPACK's accounting): headers that
// just fit on the first call can fail every replay to that client, while
// clients with a larger limit get it.
//
// On replay the response message is rebuilt from its wire form. Its type
// is Config.NewResponse's, if set; otherwise the method's output type,
// found through protoregistry (the method descriptor in GlobalFiles, its
// output message in GlobalTypes), which works for every service generated
// by protoc-gen-go; otherwise the message type recorded with the response,
// found in GlobalTypes, which covers services registered by hand with a
// grpc.ServiceDesc whose descriptors are not in GlobalFiles. A response
// that cannot be rebuilt gives Internal and leaves the record as it is.
// Messages of the original protobuf API (github.com/golang/protobuf before
// 1.4, gogo/protobuf: no ProtoReflect method), which gRPC's codec accepts,
// are fingerprinted and recorded through their protoadapt.MessageV2Of
// view, and replayed as the handler's own type; where that type is in no
// registry (gogo's), Config.NewResponse returns
// protoadapt.MessageV2Of(new(T)).
//
// Streaming methods (server, client and bidirectional streaming) cannot be
// protected: a stream's outcome is not one answer that could be recorded.
// The unary interceptor does not see them, so that without more a stream
// that carries an idempotency-key runs on every call, unmarked, its client
// believing itself protected. Install the stream interceptor of the same
// Config next to the unary one:
//
//	stream, err := idemgrpc.NewStream(cfg)
//	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(recovery, ic), grpc.ChainStreamInterceptor(stream))
//
// It refuses a streaming call of a protected method (Config.Protect) that
// carries a key, valid or not, with Unimplemented (reason
// IDEMPOTENCY_KEY_UNSUPPORTED) before its handler runs, and lets every
// other stream through untouched: Config.RequireKey does not apply to
// streams. A method whose effect must happen once is best exposed as a
// unary method, or its stream made to carry an idempotency key of its own
// (in a message) that its handler checks.
//
// The handler's context has no deadline, whatever the client's: a client
// whose deadline passes gets DeadlineExceeded, while the handler runs on
// and its outcome is recorded for the retry. Bound the handler's work
// itself where it must end.
//
// This package is a module of its own, so that gRPC and protobuf are
// dependencies only of programs that use it.
package idemgrpc
