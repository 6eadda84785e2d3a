package idemgrpc_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/idemgo/idem/contrib/idemgrpc"
	"github.com/idemgo/idem/store/memstore"
)

// legacyText is a message of the original protobuf API
// (github.com/golang/protobuf before 1.4, gogo/protobuf): no ProtoReflect
// method, only struct tags. gRPC's codec encodes it (through
// protoadapt.MessageV2Of); on the wire it is a google.protobuf.StringValue.
type legacyText struct {
	Value string `protobuf:"bytes,1,opt,name=value,proto3" json:"value,omitempty"`
}

func (m *legacyText) Reset()         { *m = legacyText{} }
func (m *legacyText) String() string { return fmt.Sprintf("legacyText{%q}", m.Value) }
func (*legacyText) ProtoMessage()    {}

const legacyMethod = "/idemgrpc.test.Legacy/Note"

// serveLegacy serves the service Legacy (Note(legacyText) returns
// (legacyText)) behind the interceptor for cfg, and counts the handler's
// runs in runs; the interceptor outside idemgrpc's reports the Go type of
// every response in types.
func serveLegacy(t *testing.T, cfg idemgrpc.Config, runs *atomic.Int32, types chan<- string) *grpc.ClientConn {
	t.Helper()
	ic, err := idemgrpc.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	outer := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		resp, err := handler(ctx, req)
		types <- fmt.Sprintf("%T", resp)
		return resp, err
	}
	desc := grpc.ServiceDesc{
		ServiceName: "idemgrpc.test.Legacy",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Note", Handler: func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
			in := new(legacyText)
			if err := dec(in); err != nil {
				return nil, err
			}
			h := func(ctx context.Context, req any) (any, error) {
				n := runs.Add(1)
				return &legacyText{Value: fmt.Sprintf("note %d: %s", n, req.(*legacyText).Value)}, nil
			}
			return interceptor(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: legacyMethod}, h)
		}}},
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(recoverPanics, outer, ic))
	srv.RegisterService(&desc, struct{}{})
	_, dial := serveBufconn(t, srv)
	return dial()
}

// Requests and responses of the original protobuf API, which gRPC's codec
// accepts, are protected like any other: the request is fingerprinted and
// the response recorded through their protoadapt view, and the replay,
// rebuilt in Config.NewResponse's view, reaches the interceptors outside
// as the handler's own type.
func TestLegacyMessages(t *testing.T) {
	s, _ := memstore.New(memstore.Config{})
	var runs atomic.Int32
	types := make(chan string, 10)
	conn := serveLegacy(t, idemgrpc.Config{Store: s, NewResponse: func(string) proto.Message {
		return protoadapt.MessageV2Of(new(legacyText))
	}}, &runs, types)
	var replies []string
	for i := range 2 {
		var header metadata.MD
		out := new(wrapperspb.StringValue)
		ctx := metadata.AppendToOutgoingContext(context.Background(), key("legacy")...)
		if err := conn.Invoke(ctx, legacyMethod, wrapperspb.String("hi"), out, grpc.Header(&header)); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if replayed := len(header.Get(idemgrpc.ReplayedMetadata)) == 1; replayed != (i == 1) {
			t.Errorf("call %d: replayed %v", i, replayed)
		}
		if typ := <-types; typ != "*idemgrpc_test.legacyText" {
			t.Errorf("call %d: the interceptor outside got a %s, want the handler's *idemgrpc_test.legacyText", i, typ)
		}
		replies = append(replies, out.GetValue())
	}
	if replies[0] != "note 1: hi" || replies[1] != replies[0] {
		t.Errorf("replies %q, want the first replayed", replies)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("the handler ran %d times, want 1", n)
	}
}
