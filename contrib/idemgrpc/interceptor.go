package idemgrpc

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/idemgo/idem"
)

// New returns the unary server interceptor for cfg, or an error naming the
// Config field that is invalid.
func New(cfg Config) (grpc.UnaryServerInterceptor, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	i := &interceptor{cfg: cfg}
	return i.intercept, nil
}

// UnaryServerInterceptor is like New but panics when cfg is invalid. Use it
// where cfg is fixed at compile time.
func UnaryServerInterceptor(cfg Config) grpc.UnaryServerInterceptor {
	i, err := New(cfg)
	if err != nil {
		panic(err)
	}
	return i
}

type interceptor struct {
	cfg Config
}

// call is the state of one protected call.
type call struct {
	i      *interceptor
	ctx    context.Context // the call's context, for grpc.SetHeader
	detach context.Context // ctx without its cancellation and deadline
	method string
	ev     Event
}

func (i *interceptor) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if !i.cfg.Protect(info.FullMethod) {
		return handler(ctx, req)
	}
	x := &call{i: i, ctx: ctx, detach: context.WithoutCancel(ctx), method: info.FullMethod, ev: Event{FullMethod: info.FullMethod}}
	defer x.emit()

	md, _ := metadata.FromIncomingContext(ctx)
	if len(md.Get(KeyMetadata+"-bin")) > 0 {
		// A key sent as binary metadata is another metadata name; ignoring
		// it would run the call unprotected, and run it again on retry.
		return x.fail(OutcomeKeyInvalid, errKeyInvalid("the key must be sent as text metadata "+KeyMetadata+", not as binary metadata "+KeyMetadata+"-bin"))
	}
	key, err := idem.ParseHeader(i.cfg.Namespace, md.Get(KeyMetadata))
	if errors.Is(err, idem.ErrKeyMissing) {
		if i.cfg.RequireKey {
			return x.fail(OutcomeKeyMissing, errKeyMissing())
		}
		x.ev.Outcome = OutcomePassThrough
		return x.pass(handler, req)
	}
	if err != nil {
		detail := err.Error()
		var ke *idem.KeyError
		if errors.As(err, &ke) {
			detail = ke.Detail
		}
		return x.fail(OutcomeKeyInvalid, errKeyInvalid(detail))
	}
	if key, err = key.WithScope(x.keyScope(md)); err != nil {
		x.ev.Err = err
		return x.fail(OutcomeInternal, errInternal("invalid key scope"))
	}
	msg := messageOf(req)
	if msg == nil {
		return x.fail(OutcomeInternal, errInternal("the request is not a protocol buffers message"))
	}
	fp, wire, err := requestFingerprint(info.FullMethod, msg)
	if err != nil {
		x.ev.Err = err
		return x.fail(OutcomeInternal, errInternal("request fingerprint failed"))
	}

	sctx, done := x.storeCtx()
	o, err := i.cfg.Store.Begin(sctx, key, idem.Request{Fingerprint: fp, Payload: requestPayload(info.FullMethod, msg, len(wire))},
		&idem.BeginOpts{Retention: i.cfg.Retention, Lease: i.cfg.Lease})
	done()
	if err != nil {
		x.ev.Err = err
		if i.cfg.FailOpen {
			x.ev.Outcome = OutcomeStoreError
			return x.pass(handler, req)
		}
		return x.retryLater(OutcomeStoreError, storeRetryDelay, errStoreUnavailable())
	}
	switch o.Kind {
	case idem.Fresh:
		return x.run(handler, req, key, o.Lease)
	case idem.PriorResult:
		return x.replay(o.Result)
	case idem.Mismatch:
		return x.fail(OutcomeMismatch, errKeyReused())
	case idem.InFlight:
		d := retryDelay(o.RetryAfter)
		return x.retryLater(OutcomeInProgress, d, errInProgress(d))
	default: // PriorError: never written by this interceptor; another writer shares the namespace.
		return x.fail(OutcomeReplayed, errInternal("the original call failed permanently"))
	}
}

// run calls the handler as the owner of key, with a context detached from
// the client's cancellation, and records or releases the key afterwards.
func (x *call) run(handler grpc.UnaryHandler, req any, key idem.Key, lease idem.Lease) (resp any, err error) {
	// What a panic in the handler leaves: the key released.
	x.ev.Outcome, x.ev.Code = OutcomeReleased, codes.Internal
	o := idem.Owner{Store: x.i.cfg.Store, Key: key, Lease: lease, SettleTimeout: x.i.cfg.StoreTimeout, Timed: true}
	defer func() { // also when the handler panicked
		x.ev.StoreTime += o.SettleTime
		if x.ev.Err == nil {
			x.ev.Err = o.Err
		}
	}()
	o.Run(x.detach, func(ctx context.Context) ([]byte, bool) {
		// The stream is wrapped even when no metadata is recorded, so that
		// a handler setting metadata after its client left is not told
		// the stream refused it, and does not fail work it has done.
		var rec *metadataRecorder
		if s := grpc.ServerTransportStreamFromContext(ctx); s != nil {
			rec = &metadataRecorder{ServerTransportStream: s, allow: x.i.cfg.replay, client: x.ctx}
			ctx = grpc.NewContextWithServerTransportStream(ctx, rec)
		}
		start := time.Now()
		served := false
		defer func() {
			if !served {
				x.ev.HandlerTime = time.Since(start)
			}
		}()
		resp, err = handler(ctx, req)
		served = true
		x.ev.HandlerTime = time.Since(start)
		header, trailer := rec.seal()

		st := statusOf(err)
		if len(st.Proto().GetDetails()) > 0 {
			// gRPC sends the status's own details, not the handler's.
			delete(trailer, statusDetailsMetadata)
		}
		x.ev.Code = clientCode(st, trailer)
		if !x.i.cfg.StoreCode(st.Code()) || err != nil && st.Code() == codes.OK {
			// An error of status OK: gRPC sends that status without the
			// response, which its client reads as an error; a retry must
			// not get the response instead.
			return nil, false
		}
		out := resp
		if out == nil && err == nil {
			// No message: gRPC sends the empty message, and so is it
			// recorded, as one of the method's response type; when that
			// type is unknown, encodeResponse refuses it.
			if m := x.i.cfg.newResponse(x.method, ""); m != nil {
				out = m
			}
		}
		b, encErr := encodeResponse(out, st, header, trailer, x.i.cfg.MaxCapture)
		if me := (*marshalError)(nil); errors.As(encErr, &me) {
			// gRPC cannot send the response either, and answers Internal:
			// the handler's work is done, so that answer is recorded, for
			// the retry to get it again rather than run the work twice.
			st = me.sent()
			x.ev.Code = clientCode(st, trailer)
			b, encErr = encodeResponse(nil, st, header, trailer, x.i.cfg.MaxCapture)
		}
		if encErr != nil {
			x.ev.Err = encErr
			return nil, false
		}
		return b, true
	})
	if o.Recorded {
		x.ev.Outcome = OutcomeExecuted
	}
	return resp, err
}

// statusOf returns the status gRPC sends for a handler's error: its own
// status, or for other errors Canceled or DeadlineExceeded when they are
// context errors and Unknown otherwise.
func statusOf(err error) *status.Status {
	if err == nil {
		return status.New(codes.OK, "")
	}
	if st, ok := status.FromError(err); ok {
		return st
	}
	return status.FromContextError(err)
}

// clientCode returns the code a gRPC client reads when st is sent with
// trailer: st's, unless the trailer holds one grpc-status-details-bin
// (which gRPC sends when st has no details of its own) that decodes as a
// status of another code, which the client reads as Internal
// ("grpc-status-details-bin mismatch"). A value that does not decode, or
// several, the client ignores.
func clientCode(st *status.Status, trailer metadata.MD) codes.Code {
	vs := trailer[statusDetailsMetadata]
	if len(vs) != 1 || len(st.Proto().GetDetails()) > 0 {
		return st.Code()
	}
	sp := status.New(codes.OK, "").Proto() // an empty google.rpc.Status to decode into
	if proto.Unmarshal([]byte(vs[0]), sp) != nil || codes.Code(sp.GetCode()) == st.Code() {
		return st.Code()
	}
	return codes.Internal
}

// replay answers with a recorded outcome, marked with the
// idempotent-replayed header.
func (x *call) replay(b []byte) (any, error) {
	rec, err := decodeResponse(b)
	if err != nil {
		x.ev.Err = err
		return x.fail(OutcomeReplayed, errInternal("recorded response unreadable"))
	}
	header := metadataOf(rec.Header, x.i.cfg.replay)
	header.Set(ReplayedMetadata, "true")
	// These fail only outside a gRPC server (a test calling the
	// interceptor directly) or after headers were sent; neither is ours.
	_ = grpc.SetHeader(x.ctx, header)
	trailer := metadataOf(rec.Trailer, x.i.cfg.replayTrailer)
	if len(trailer) > 0 {
		_ = grpc.SetTrailer(x.ctx, trailer)
	}
	x.ev.Outcome, x.ev.Code = OutcomeReplayed, clientCode(status.New(codes.OK, ""), trailer)
	if codes.Code(rec.Code) != codes.OK {
		st, err := rec.errorStatus()
		if err != nil {
			x.ev.Err = err
			return x.fail(OutcomeReplayed, errInternal("recorded status unreadable"))
		}
		x.ev.Code = clientCode(st, trailer)
		return nil, st.Err()
	}
	resp := x.i.cfg.newResponse(x.method, protoreflect.FullName(rec.Type))
	if resp == nil {
		x.ev.Err = errors.New("idemgrpc: no response type for " + x.method + " (recorded " + rec.Type + "); set Config.NewResponse")
		return x.fail(OutcomeReplayed, errInternal("recorded response cannot be rebuilt"))
	}
	if got := resp.ProtoReflect().Descriptor().FullName(); string(got) != rec.Type {
		// Protobuf would decode the bytes into another message without
		// complaint: the retry would get a response never sent.
		x.ev.Err = errors.New("idemgrpc: recorded response of " + x.method + " is a " + rec.Type + ", not the " + string(got) + " it would be replayed as")
		return x.fail(OutcomeReplayed, errInternal("recorded response is of another type"))
	}
	if err := proto.Unmarshal(rec.Body, resp); err != nil {
		x.ev.Err = err
		return x.fail(OutcomeReplayed, errInternal("recorded response does not decode"))
	}
	if _, ok := resp.(protoadapt.MessageV1); !ok {
		// A view of a message of the original API (see messageOf): the
		// interceptors outside get the message itself, as the handler
		// returned it.
		return protoadapt.MessageV1Of(resp), nil
	}
	return resp, nil
}

// fail answers with one of the interceptor's errors.
func (x *call) fail(o Outcome, err error) (any, error) {
	x.ev.Outcome, x.ev.Code = o, status.Code(err)
	return nil, err
}

// retryLater fails the call with err, an error a retry of the same call
// may get past after d, which it tells gRPC's own retries too: with the
// trailer grpc-retry-pushback-ms, a client whose retry policy lists err's
// code waits d before it retries, instead of its policy's backoff (which
// can retry an in-progress call many times before it ends). Clients of
// other policies and languages read the RetryInfo detail of err.
func (x *call) retryLater(o Outcome, d time.Duration, err error) (any, error) {
	_ = grpc.SetTrailer(x.ctx, metadata.Pairs(pushbackMetadata, strconv.FormatInt(d.Milliseconds(), 10)))
	return x.fail(o, err)
}

// pass calls the handler unprotected.
func (x *call) pass(handler grpc.UnaryHandler, req any) (any, error) {
	start := time.Now()
	resp, err := handler(x.ctx, req)
	x.ev.HandlerTime = time.Since(start)
	x.ev.Code = statusOf(err).Code()
	return resp, err
}

// storeCtx returns the context of a store call, detached from the client's
// cancellation and bounded by StoreTimeout when set, and a function ending
// the call that accounts its time.
func (x *call) storeCtx() (context.Context, func()) {
	start := time.Now()
	ctx, cancel := x.detach, context.CancelFunc(nil)
	if x.i.cfg.StoreTimeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, x.i.cfg.StoreTimeout)
	}
	return ctx, func() {
		if cancel != nil {
			cancel()
		}
		x.ev.StoreTime += time.Since(start)
	}
}

// keyScope is Config.KeyScope's answer for x, whose incoming metadata is
// md. A panic of it goes on, described in x's event as an internal error
// with the Internal code a recovering interceptor outside answers.
func (x *call) keyScope(md metadata.MD) string {
	if x.i.cfg.scopeByAuthorization {
		return authorizationScope(md) // without reading the metadata again
	}
	defer func() {
		if v := recover(); v != nil {
			x.ev.Outcome, x.ev.Code = OutcomeInternal, codes.Internal
			x.ev.Err = fmt.Errorf("idemgrpc: Config.KeyScope panicked: %v", v)
			panic(v)
		}
	}()
	return x.i.cfg.KeyScope(x.ctx)
}

func (x *call) emit() {
	if x.i.cfg.OnEvent != nil {
		x.i.cfg.OnEvent(x.ev)
	}
}
