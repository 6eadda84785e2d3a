package idemgrpc_test

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"github.com/idemgo/idem/contrib/idemgrpc"
	"github.com/idemgo/idem/store/memstore"
)

// gRPC's health-checking service (and channelz), registered on the same server as the
// protected ones, answers its probes (which send no key) with the
// interceptor installed for the whole server and RequireKey set, and is
// never replayed: its methods only read, though its descriptor does not
// say so.
func TestHealthChecksPassThrough(t *testing.T) {
	s, err := memstore.New(memstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	events := make(chan idemgrpc.Event, 10)
	ic, err := idemgrpc.New(idemgrpc.Config{Store: s, RequireKey: true, OnEvent: func(e idemgrpc.Event) { events <- e }})
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(ic))
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	_, dial := serveBufconn(t, srv)
	client := healthpb.NewHealthClient(dial())

	res, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{})
	if err != nil || res.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Check without a key: %v, %v; want SERVING", res, err)
	}
	if _, err := client.List(context.Background(), &healthpb.HealthListRequest{}); err != nil {
		t.Fatalf("List without a key: %v", err)
	}
	// A client that sends a key with every call gets the current status,
	// not the one recorded for the key.
	ctx := metadata.AppendToOutgoingContext(context.Background(), idemgrpc.KeyMetadata, "probe")
	if _, err := client.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("Check with a key: %v", err)
	}
	hs.Shutdown() // NOT_SERVING from now on
	var header metadata.MD
	res, err = client.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&header))
	if err != nil || res.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING || len(header.Get(idemgrpc.ReplayedMetadata)) > 0 {
		t.Fatalf("Check after Shutdown: %v, %v, header %v; want NOT_SERVING, not replayed", res, err, header)
	}
	if len(events) != 0 {
		t.Errorf("%d events for health checks, want none: they are not protected", len(events))
	}
	for _, m := range []string{"/grpc.health.v1.Health/Check", "/grpc.health.v1.Health/List", "/grpc.channelz.v1.Channelz/GetServers"} {
		if idemgrpc.ProtectUnlessIdempotent(m) {
			t.Errorf("ProtectUnlessIdempotent(%q) = true", m)
		}
	}
}
