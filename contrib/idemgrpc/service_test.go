package idemgrpc_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/idemgo/idem/contrib/idemgrpc"
	"github.com/idemgo/idem/idemtest"
	"github.com/idemgo/idem/store/memstore"
)

// The test service, as protoc would register it from
//
//	syntax = "proto3";
//	package idemgrpc.test;
//	import "google/protobuf/struct.proto";
//	import "google/protobuf/wrappers.proto";
//	service Payments {
//	  rpc Charge(google.protobuf.Struct) returns (google.protobuf.StringValue);
//	  rpc Refund(google.protobuf.Struct) returns (google.protobuf.StringValue);
//	  rpc Lookup(google.protobuf.StringValue) returns (google.protobuf.StringValue) {
//	    option idempotency_level = NO_SIDE_EFFECTS;
//	  }
//	}
//
// Its descriptor is built here, since protoc is not at hand, and
// registered in protoregistry.GlobalFiles. The service Unlisted
// (Echo(StringValue) returns (StringValue)) exists only as a
// grpc.ServiceDesc: no descriptor of it is registered.
const (
	chargeMethod = "/idemgrpc.test.Payments/Charge"
	refundMethod = "/idemgrpc.test.Payments/Refund"
	lookupMethod = "/idemgrpc.test.Payments/Lookup"
	echoMethod   = "/idemgrpc.test.Unlisted/Echo"
)

func init() {
	noSideEffects := descriptorpb.MethodOptions_NO_SIDE_EFFECTS
	fdp := &descriptorpb.FileDescriptorProto{
		Name:       proto.String("idemgrpc/test/payments.proto"),
		Package:    proto.String("idemgrpc.test"),
		Syntax:     proto.String("proto3"),
		Dependency: []string{"google/protobuf/struct.proto", "google/protobuf/wrappers.proto"},
		Service: []*descriptorpb.ServiceDescriptorProto{{
			Name: proto.String("Payments"),
			Method: []*descriptorpb.MethodDescriptorProto{
				{Name: proto.String("Charge"), InputType: proto.String(".google.protobuf.Struct"), OutputType: proto.String(".google.protobuf.StringValue")},
				{Name: proto.String("Refund"), InputType: proto.String(".google.protobuf.Struct"), OutputType: proto.String(".google.protobuf.StringValue")},
				{Name: proto.String("Lookup"), InputType: proto.String(".google.protobuf.StringValue"), OutputType: proto.String(".google.protobuf.StringValue"),
					Options: &descriptorpb.MethodOptions{IdempotencyLevel: &noSideEffects}},
			},
		}},
	}
	fd, err := protodesc.NewFile(fdp, protoregistry.GlobalFiles)
	if err != nil {
		panic(err)
	}
	if err := protoregistry.GlobalFiles.RegisterFile(fd); err != nil {
		panic(err)
	}
}

// payments implements the test services: it counts its runs and can be
// made to wait, fail, panic or set metadata.
type payments struct {
	runs      atomic.Int32
	err       error         // when set, returned instead of a response
	panics    atomic.Int32  // the next so many calls panic
	hold      chan struct{} // when set, calls wait on it
	started   chan struct{} // when set, receives once per call as it starts
	header    metadata.MD   // set with grpc.SetHeader
	trailer   metadata.MD   // set with grpc.SetTrailer
	pad       int           // bytes of padding in each reply
	sawCancel atomic.Bool   // a handler's context was done when it returned
	nilReply  bool          // reply with a nil *wrapperspb.StringValue
	noReply   bool          // reply with no message at all (return nil, nil)
	badReply  bool          // reply with a message that does not marshal
	strictMD  bool          // fail when setting header or trailer metadata fails
	// spawn, when set, is called with the handler's context as a call
	// starts, to set metadata from elsewhere.
	spawn func(ctx context.Context)
}

func (p *payments) handle(ctx context.Context, kind string, in proto.Message) (proto.Message, error) {
	n := p.runs.Add(1)
	if p.spawn != nil {
		p.spawn(ctx)
	}
	if p.started != nil {
		p.started <- struct{}{}
	}
	if p.hold != nil {
		<-p.hold
	}
	defer func() { p.sawCancel.Store(p.sawCancel.Load() || ctx.Err() != nil) }()
	if p.panics.Add(-1) >= 0 {
		panic("boom")
	}
	if p.header != nil {
		if err := grpc.SetHeader(ctx, p.header); err != nil && p.strictMD {
			return nil, err
		}
	}
	if p.trailer != nil {
		if err := grpc.SetTrailer(ctx, p.trailer); err != nil && p.strictMD {
			return nil, err
		}
	}
	if p.err != nil {
		return nil, p.err
	}
	if p.nilReply {
		return (*wrapperspb.StringValue)(nil), nil
	}
	if p.noReply {
		return nil, nil
	}
	if p.badReply {
		return wrapperspb.String("invalid UTF-8: \xff"), nil
	}
	var arg string
	switch in := in.(type) {
	case *structpb.Struct:
		arg = fmt.Sprint(in.GetFields()["amount"].GetNumberValue())
	case *wrapperspb.StringValue:
		arg = in.GetValue()
	}
	return wrapperspb.String(fmt.Sprintf("%s %d: %s%*s", kind, n, arg, p.pad, "")), nil
}

// unaryMethod is what protoc-gen-go-grpc generates for a unary method.
func unaryMethod(name, fullMethod string, newIn func() proto.Message, kind string) grpc.MethodDesc {
	return grpc.MethodDesc{
		MethodName: name,
		Handler: func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
			in := newIn()
			if err := dec(in); err != nil {
				return nil, err
			}
			p := srv.(*payments)
			h := func(ctx context.Context, req any) (any, error) { return p.handle(ctx, kind, req.(proto.Message)) }
			if interceptor == nil {
				return h(ctx, in)
			}
			return interceptor(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: fullMethod}, h)
		},
	}
}

func newStruct() proto.Message { return new(structpb.Struct) }
func newString() proto.Message { return new(wrapperspb.StringValue) }

var paymentsDesc = grpc.ServiceDesc{
	ServiceName: "idemgrpc.test.Payments",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{
		unaryMethod("Charge", chargeMethod, newStruct, "charge"),
		unaryMethod("Refund", refundMethod, newStruct, "refund"),
		unaryMethod("Lookup", lookupMethod, newString, "lookup"),
	},
	Metadata: "idemgrpc/test/payments.proto",
}

var unlistedDesc = grpc.ServiceDesc{
	ServiceName: "idemgrpc.test.Unlisted",
	HandlerType: (*any)(nil),
	Methods:     []grpc.MethodDesc{unaryMethod("Echo", echoMethod, newString, "echo")},
	Streams: []grpc.StreamDesc{{
		StreamName:    "Watch",
		ServerStreams: true,
		Handler: func(srv any, stream grpc.ServerStream) error {
			in := new(wrapperspb.StringValue)
			if err := stream.RecvMsg(in); err != nil {
				return err
			}
			n := srv.(*payments).runs.Add(1)
			return stream.SendMsg(wrapperspb.String(fmt.Sprintf("watch %d: %s", n, in.GetValue())))
		},
	}, {
		StreamName:    "Collect",
		ClientStreams: true,
		Handler: func(srv any, stream grpc.ServerStream) error {
			n := srv.(*payments).runs.Add(1)
			var all string
			for {
				in := new(wrapperspb.StringValue)
				if err := stream.RecvMsg(in); err == io.EOF {
					break
				} else if err != nil {
					return err
				}
				all += in.GetValue()
			}
			return stream.SendMsg(wrapperspb.String(fmt.Sprintf("collect %d: %s", n, all)))
		},
	}, {
		StreamName:    "Chat",
		ServerStreams: true,
		ClientStreams: true,
		Handler: func(srv any, stream grpc.ServerStream) error {
			n := srv.(*payments).runs.Add(1)
			for {
				in := new(wrapperspb.StringValue)
				if err := stream.RecvMsg(in); err == io.EOF {
					return nil
				} else if err != nil {
					return err
				}
				if err := stream.SendMsg(wrapperspb.String(fmt.Sprintf("chat %d: %s", n, in.GetValue()))); err != nil {
					return err
				}
			}
		},
	}},
}

// The streaming methods of Unlisted: server-streaming, client-streaming
// and bidirectional.
const (
	watchMethod   = "/idemgrpc.test.Unlisted/Watch"
	collectMethod = "/idemgrpc.test.Unlisted/Collect"
	chatMethod    = "/idemgrpc.test.Unlisted/Chat"
)

// recoverPanics stands for the recovery interceptor a server puts first:
// a panic becomes Internal.
func recoverPanics(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	defer func() {
		if p := recover(); p != nil {
			resp, err = nil, status.Errorf(codes.Internal, "panic: %v", p)
		}
	}()
	return handler(ctx, req)
}

type bundle struct {
	store *memstore.Store
	clock *idemtest.Clock
	svc   *payments
	conn  *grpc.ClientConn
	// dial connects another client, with options of its own.
	dial   func(...grpc.DialOption) *grpc.ClientConn
	events chan idemgrpc.Event
	// calls receives the server's context of each call, as the
	// interceptor gets it: it ends when the server sees the client go.
	calls chan context.Context
}

// watch is the interceptor before idemgrpc's that hands each call's
// context to the test.
func (b *bundle) watch(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	select {
	case b.calls <- ctx:
	default:
	}
	return handler(ctx, req)
}

// setup serves both test services over bufconn behind recoverPanics and
// the interceptor for cfg (its Store defaults to a memstore on a test
// clock), and connects a client.
func setup(t *testing.T, cfg idemgrpc.Config) *bundle {
	t.Helper()
	clock := idemtest.NewClock()
	s, err := memstore.New(memstore.Config{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	b := &bundle{store: s, clock: clock, svc: &payments{}, events: make(chan idemgrpc.Event, 1000), calls: make(chan context.Context, 1000)}
	if cfg.Store == nil {
		cfg.Store = s
	}
	cfg.OnEvent = func(e idemgrpc.Event) { b.events <- e }
	ic, err := idemgrpc.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b.dial = serveDial(t, b.svc, grpc.ChainUnaryInterceptor(recoverPanics, b.watch, ic))
	b.conn = b.dial()
	return b
}

// serveDial runs a server with opts for svc over bufconn until the test
// ends and returns a function connecting a client to it with dialOpts.
func serveDial(t testing.TB, svc *payments, opts ...grpc.ServerOption) func(dialOpts ...grpc.DialOption) *grpc.ClientConn {
	srv := grpc.NewServer(opts...)
	srv.RegisterService(&paymentsDesc, svc)
	srv.RegisterService(&unlistedDesc, svc)
	_, dial := serveBufconn(t, srv)
	return dial
}

// serveBufconn serves srv over bufconn until the test ends and returns
// its listener and a function connecting a client to it with dialOpts.
func serveBufconn(t testing.TB, srv *grpc.Server) (*bufconn.Listener, func(dialOpts ...grpc.DialOption) *grpc.ClientConn) {
	lis := bufconn.Listen(1 << 20)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(lis)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-served
	})
	return lis, func(dialOpts ...grpc.DialOption) *grpc.ClientConn {
		conn, err := grpc.NewClient("passthrough:///bufnet", append([]grpc.DialOption{
			grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
			grpc.WithTransportCredentials(insecure.NewCredentials())}, dialOpts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() }) // before the server stops
		return conn
	}
}

// result is what a client got from one call.
type result struct {
	reply   string
	header  metadata.MD
	trailer metadata.MD
	err     error
}

func (r result) replayed() bool {
	v := r.header.Get(idemgrpc.ReplayedMetadata)
	return len(v) == 1 && v[0] == "true"
}

func (r result) code() codes.Code { return status.Code(r.err) }

// invoke calls method with in and the outgoing metadata md (name, value
// pairs) on ctx.
func invoke(ctx context.Context, conn *grpc.ClientConn, method string, in proto.Message, md ...string) result {
	var r result
	out := new(wrapperspb.StringValue)
	ctx = metadata.AppendToOutgoingContext(ctx, md...)
	r.err = conn.Invoke(ctx, method, in, out, grpc.Header(&r.header), grpc.Trailer(&r.trailer))
	r.reply = out.GetValue()
	return r
}

func (b *bundle) call(method string, in proto.Message, md ...string) result {
	return invoke(context.Background(), b.conn, method, in, md...)
}

// amount is a Charge or Refund request.
func amount(v float64) *structpb.Struct {
	return &structpb.Struct{Fields: map[string]*structpb.Value{
		"amount":   structpb.NewNumberValue(v),
		"currency": structpb.NewStringValue("eur"),
	}}
}

func key(k string) []string { return []string{idemgrpc.KeyMetadata, k} }
