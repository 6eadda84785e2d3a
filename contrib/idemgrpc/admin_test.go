package idemgrpc_test

import (
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/idemgo/idem/contrib/idemgrpc"
	"github.com/idemgo/idem/store/memstore"
)

// fetchClientStatusMethod is the unary method of the xDS client status
// discovery service (CSDS), which gRPC's admin.Register adds next to
// channelz in programs that use xDS. Its descriptor and messages belong to
// another module: the test serves a stand-in under its name.
const fetchClientStatusMethod = "/envoy.service.status.v3.ClientStatusDiscoveryService/FetchClientStatus"

// The read-only services gRPC-go registers next to an application's own
// (server reflection, and the xDS client status service that
// admin.Register adds with channelz) answer their tools without a key
// under RequireKey, and a key on their streams is not refused by the
// stream interceptor: their descriptors declare no idempotency level, yet
// they only read, and their clients (grpcurl, debugging tools, a client
// attaching a key to every call) are not to be turned away.
func TestAdminServicesPassThrough(t *testing.T) {
	for _, m := range []string{
		fetchClientStatusMethod,
		"/envoy.service.status.v3.ClientStatusDiscoveryService/StreamClientStatus",
		"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
		"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
	} {
		if idemgrpc.ProtectUnlessIdempotent(m) {
			t.Errorf("ProtectUnlessIdempotent(%q) = true", m)
		}
	}

	s, err := memstore.New(memstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := idemgrpc.Config{Store: s, RequireKey: true}
	unary, err := idemgrpc.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := idemgrpc.NewStream(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(unary), grpc.ChainStreamInterceptor(stream))
	reflection.Register(srv)
	svc := &payments{}
	srv.RegisterService(&grpc.ServiceDesc{
		ServiceName: "envoy.service.status.v3.ClientStatusDiscoveryService",
		HandlerType: (*any)(nil),
		Methods:     []grpc.MethodDesc{unaryMethod("FetchClientStatus", fetchClientStatusMethod, newString, "status")},
	}, svc)
	_, dial := serveBufconn(t, srv)
	conn := dial()

	for i := range 2 {
		r := invoke(t.Context(), conn, fetchClientStatusMethod, wrapperspb.String("x"))
		if r.err != nil || r.replayed() {
			t.Fatalf("FetchClientStatus without a key, call %d: %v, replayed %v", i, r.err, r.replayed())
		}
	}
	ctx := metadata.AppendToOutgoingContext(t.Context(), idemgrpc.KeyMetadata, "tool")
	for i := range 2 {
		rs, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := rs.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
			t.Fatal(err)
		}
		res, err := rs.Recv()
		if err != nil || len(res.GetListServicesResponse().GetService()) == 0 {
			t.Fatalf("server reflection with a key, call %d: %v, %v; want the services listed", i, res, err)
		}
		_ = rs.CloseSend()
	}
}
