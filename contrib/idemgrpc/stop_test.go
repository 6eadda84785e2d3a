package idemgrpc_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/test/bufconn"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/contrib/idemgrpc"
	"github.com/idemgo/idem/store/memstore"
)

// A server that stops while a protected call runs: GracefulStop waits for
// the handler, and its client gets the response; Stop does not, and its
// client gets Unavailable, but the handler, detached from the call, runs on
// and its outcome, with the metadata it set on the closed stream, is
// recorded all the same. Either way a retry to another server on the same
// store gets the replay, and the handler ran once.
func TestServerStopWhileRunning(t *testing.T) {
	for _, graceful := range []bool{true, false} {
		name := "Stop"
		if graceful {
			name = "GracefulStop"
		}
		t.Run(name, func(t *testing.T) {
			s, err := memstore.New(memstore.Config{})
			if err != nil {
				t.Fatal(err)
			}
			cfg := idemgrpc.Config{Store: s, ReplayMetadata: []string{"x-charge-id"}}
			svc := &payments{hold: make(chan struct{}), started: make(chan struct{}, 1),
				header: metadata.Pairs("x-charge-id", "ch_1"), strictMD: true}
			calls := make(chan context.Context, 1)
			srv, lis, conn := serveStoppable(t, cfg, svc, calls)
			done := make(chan result)
			go func() { done <- invoke(context.Background(), conn, chargeMethod, amount(3), key("stop")...) }()
			<-svc.started
			stopped := make(chan struct{})
			go func() {
				defer close(stopped)
				if graceful {
					srv.GracefulStop()
				} else {
					srv.Stop()
				}
			}()
			var first result
			if graceful {
				// The server stops listening as it starts to stop.
				for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
					c, err := lis.Dial()
					if err != nil {
						break
					}
					_ = c.Close()
					if time.Now().After(deadline) {
						t.Fatal("GracefulStop did not start")
					}
				}
				close(svc.hold)
				first = <-done
				wantOK(t, first)
			} else {
				if first = <-done; first.code() != codes.Unavailable {
					t.Fatalf("call cut by Stop: %v, want Unavailable", first.err)
				}
				<-(<-calls).Done() // the server saw the stream close
				close(svc.hold)
				k, _ := idem.ParseKey(idemgrpc.DefaultNamespace, "stop")
				for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
					rec, err := s.Get(context.Background(), k)
					if err == nil && rec.Status == idem.StatusCommitted {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("the outcome was not recorded after Stop: %+v %v", rec, err)
					}
				}
			}
			<-stopped
			svc2 := &payments{}
			_, _, conn2 := serveStoppable(t, cfg, svc2, nil)
			r := invoke(context.Background(), conn2, chargeMethod, amount(3), key("stop")...)
			if r.err != nil || !r.replayed() || r.reply != "charge 1: 3" {
				t.Fatalf("retry on another server: %q %v replayed %v", r.reply, r.err, r.replayed())
			}
			if h := r.header.Get("x-charge-id"); len(h) != 1 || h[0] != "ch_1" {
				t.Errorf("replayed x-charge-id %q, want [ch_1]", h)
			}
			if n := svc.runs.Load() + svc2.runs.Load(); n != 1 {
				t.Errorf("the handler ran %d times, want 1", n)
			}
		})
	}
}

// serveStoppable serves the test services behind the interceptor for cfg
// over bufconn, and returns the server, for the test to stop, its
// listener and a client. Each call's server context is sent to calls, when set.
func serveStoppable(t *testing.T, cfg idemgrpc.Config, svc *payments, calls chan<- context.Context) (*grpc.Server, *bufconn.Listener, *grpc.ClientConn) {
	t.Helper()
	ic, err := idemgrpc.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	watch := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if calls != nil {
			calls <- ctx
		}
		return handler(ctx, req)
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(recoverPanics, watch, ic))
	srv.RegisterService(&paymentsDesc, svc)
	lis, dial := serveBufconn(t, srv)
	return srv, lis, dial()
}
