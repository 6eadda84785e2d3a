package idemgrpc_test

import (
	"context"
	"fmt"
	"log"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/idemgo/idem/contrib/idemgrpc"
	"github.com/idemgo/idem/store/memstore"
)

// A retried call with the same idempotency-key gets the recorded response,
// marked with the idempotent-replayed header; the handler runs once. The
// service is registered by hand, as protoc-gen-go-grpc would register it,
// with a well-known type as request and response.
func Example() {
	store, err := memstore.New(memstore.Config{})
	if err != nil {
		log.Fatal(err)
	}
	ic, err := idemgrpc.New(idemgrpc.Config{Store: store, RequireKey: true})
	if err != nil {
		log.Fatal(err)
	}

	orders := 0
	place := func(ctx context.Context, in *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
		orders++
		return wrapperspb.String(fmt.Sprintf("order %d for %s", orders, in.GetValue())), nil
	}
	desc := grpc.ServiceDesc{
		ServiceName: "example.Orders",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{
			MethodName: "Place",
			Handler: func(_ any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
				in := new(wrapperspb.StringValue)
				if err := dec(in); err != nil {
					return nil, err
				}
				info := &grpc.UnaryServerInfo{FullMethod: "/example.Orders/Place"}
				return interceptor(ctx, in, info, func(ctx context.Context, req any) (any, error) {
					return place(ctx, req.(*wrapperspb.StringValue))
				})
			},
		}},
	}

	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(grpc.UnaryInterceptor(ic))
	srv.RegisterService(&desc, nil)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	conn, err := grpc.NewClient("passthrough:///orders",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()

	ctx := metadata.AppendToOutgoingContext(context.Background(), "idempotency-key", "order-1")
	for range 2 {
		var header metadata.MD
		out := new(wrapperspb.StringValue)
		if err := conn.Invoke(ctx, "/example.Orders/Place", wrapperspb.String("alice"), out, grpc.Header(&header)); err != nil {
			log.Fatal(err)
		}
		fmt.Println(out.GetValue(), "replayed:", header.Get("idempotent-replayed"))
	}
	fmt.Println("orders:", orders)
	// Output:
	// order 1 for alice replayed: []
	// order 1 for alice replayed: [true]
	// orders: 1
}
