package idemgrpc_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/idemgo/idem/contrib/idemgrpc"
	"github.com/idemgo/idem/store/memstore"
)

// The header and trailer metadata a handler sets along with an error that
// is recorded are replayed with it.
func TestMetadataOfRecordedErrorReplayed(t *testing.T) {
	b := setup(t, idemgrpc.Config{ReplayMetadata: []string{"x-charge-id"}})
	b.svc.header = metadata.Pairs("x-charge-id", "h_1")
	b.svc.trailer = metadata.Pairs("x-charge-id", "t_1")
	b.svc.err = status.Error(codes.FailedPrecondition, "card expired")
	first := b.call(chargeMethod, amount(1), key("md-err")...)
	if first.code() != codes.FailedPrecondition {
		t.Fatalf("first call: %v", first.err)
	}
	r := b.call(chargeMethod, amount(1), key("md-err")...)
	if !r.replayed() || r.code() != codes.FailedPrecondition || status.Convert(r.err).Message() != "card expired" {
		t.Fatalf("retry: %v replayed %v", r.err, r.replayed())
	}
	for _, md := range []metadata.MD{first.header, r.header} {
		if got := md.Get("x-charge-id"); !slices.Equal(got, []string{"h_1"}) {
			t.Errorf("header x-charge-id = %q, want [h_1]", got)
		}
	}
	for _, md := range []metadata.MD{first.trailer, r.trailer} {
		if got := md.Get("x-charge-id"); !slices.Equal(got, []string{"t_1"}) {
			t.Errorf("trailer x-charge-id = %q, want [t_1]", got)
		}
	}
	wantRuns(t, b, 1)
}

// Metadata set with the handler's context once the handler has returned,
// before gRPC sends the response, is refused with an error and neither
// sent nor recorded: the first client and the retry get the same
// metadata.
func TestMetadataSetAfterTheHandlerReturnedIsRefused(t *testing.T) {
	s, err := memstore.New(memstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ic, err := idemgrpc.New(idemgrpc.Config{Store: s, ReplayMetadata: []string{"x-late"}})
	if err != nil {
		t.Fatal(err)
	}
	svc := &payments{}
	hctx := make(chan context.Context, 1)
	svc.spawn = func(ctx context.Context) { hctx <- ctx }
	errs := make(chan error, 2)
	late := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		resp, err := handler(ctx, req)
		select {
		case h := <-hctx: // the handler ran and has returned
			errs <- grpc.SetHeader(h, metadata.Pairs("x-late", "h"))
			errs <- grpc.SetTrailer(h, metadata.Pairs("x-late", "t"))
		default:
		}
		return resp, err
	}
	conn := serveDial(t, svc, grpc.ChainUnaryInterceptor(late, ic))()
	first := invoke(context.Background(), conn, chargeMethod, amount(1), key("late")...)
	wantOK(t, first)
	for range 2 {
		if err := <-errs; err == nil {
			t.Error("metadata set after the handler returned was accepted")
		}
	}
	r := invoke(context.Background(), conn, chargeMethod, amount(1), key("late")...)
	if !r.replayed() {
		t.Fatalf("retry not replayed: %v", r.err)
	}
	if !slices.Equal(first.header.Get("x-late"), r.header.Get("x-late")) || !slices.Equal(first.trailer.Get("x-late"), r.trailer.Get("x-late")) {
		t.Errorf("x-late: first call header %q trailer %q, replay header %q trailer %q", first.header.Get("x-late"), first.trailer.Get("x-late"), r.header.Get("x-late"), r.trailer.Get("x-late"))
	}
	if first.header.Get("x-late") != nil || first.trailer.Get("x-late") != nil {
		t.Errorf("metadata set after the handler returned was sent: header %v trailer %v", first.header, first.trailer)
	}
}

// Trailers set from another goroutine while the handler returns: each is
// either sent and recorded or refused, so the first client and the retry
// get the same ones, and -race finds no race.
func TestMetadataSetConcurrentlyAsTheHandlerReturns(t *testing.T) {
	b := setup(t, idemgrpc.Config{ReplayMetadata: []string{"x-seq"}})
	var wg sync.WaitGroup
	b.svc.spawn = func(ctx context.Context) {
		wg.Go(func() {
			for i := range 200 {
				if grpc.SetTrailer(ctx, metadata.Pairs("x-seq", strconv.Itoa(i))) != nil {
					return
				}
			}
		})
	}
	for i := range 20 {
		k := "seq" + strconv.Itoa(i)
		first := b.call(chargeMethod, amount(1), key(k)...)
		wantOK(t, first)
		wg.Wait()
		r := b.call(chargeMethod, amount(1), key(k)...) // the handler does not run: no goroutine
		if !r.replayed() {
			t.Fatalf("retry %s not replayed: %v", k, r.err)
		}
		if got, want := r.trailer.Get("x-seq"), first.trailer.Get("x-seq"); !slices.Equal(got, want) {
			t.Fatalf("call %s: replayed trailer x-seq %q, the first client got %q", k, got, want)
		}
	}
}

// The default Config.KeyScope, computed from the metadata the key is read
// from, gives the scopes of ScopeByAuthorization: two servers sharing a
// store, one with each, answer each other's retries of the same caller and
// not of another.
func TestDefaultScopeIsScopeByAuthorization(t *testing.T) {
	s, err := memstore.New(memstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var conns []*grpc.ClientConn
	svc := &payments{}
	for _, scope := range []func(context.Context) string{nil, idemgrpc.ScopeByAuthorization} {
		ic, err := idemgrpc.New(idemgrpc.Config{Store: s, KeyScope: scope})
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, serveDial(t, svc, grpc.UnaryInterceptor(ic))())
	}
	alice := append(key("shared"), "authorization", "Bearer alice")
	bob := append(key("shared"), "authorization", "Bearer bob")
	first := invoke(context.Background(), conns[0], chargeMethod, amount(1), alice...)
	wantOK(t, first)
	if r := invoke(context.Background(), conns[1], chargeMethod, amount(1), alice...); !r.replayed() || r.reply != first.reply {
		t.Errorf("alice's retry on the other server: %q %v replayed %v, want %q replayed", r.reply, r.err, r.replayed(), first.reply)
	}
	for _, conn := range conns {
		if r := invoke(context.Background(), conn, chargeMethod, amount(1), bob...); r.err != nil || r.replayed() && r.reply == first.reply {
			t.Errorf("bob: %q %v replayed %v, want his own call", r.reply, r.err, r.replayed())
		}
	}
	if n := svc.runs.Load(); n != 2 {
		t.Errorf("handler ran %d times, want 2 (alice once, bob once)", n)
	}
}

// grpc- metadata a handler sets, other than grpc-status-details-bin, is
// gRPC's: grpc-status and grpc-message are not sent, the others are sent
// to the first client but never recorded (Config.ReplayMetadata cannot
// name them: TestReplayMetadataRefusesGRPCNames); the status is replayed
// as the client read it.
func TestHandlerGRPCMetadataIsNotRecorded(t *testing.T) {
	b := setup(t, idemgrpc.Config{ReplayMetadata: []string{"x-charge-id"}})
	b.svc.header = metadata.Pairs("grpc-custom", "h", "x-charge-id", "ch_1")
	b.svc.trailer = metadata.Pairs("grpc-retry-pushback-ms", "5", "grpc-status", "3", "grpc-message", "other")
	b.svc.err = status.Error(codes.NotFound, "no such card")
	first := b.call(chargeMethod, amount(1), key("grpc-md")...)
	r := b.call(chargeMethod, amount(1), key("grpc-md")...)
	for _, got := range []result{first, r} {
		if st := status.Convert(got.err); st.Code() != codes.NotFound || st.Message() != "no such card" {
			t.Errorf("status %v, want NotFound: no such card", st.Proto())
		}
		if got.trailer.Get("grpc-status") != nil || got.trailer.Get("grpc-message") != nil {
			t.Errorf("handler's grpc-status or grpc-message sent: %v", got.trailer)
		}
		if v := got.header.Get("x-charge-id"); !slices.Equal(v, []string{"ch_1"}) {
			t.Errorf("x-charge-id = %q, want [ch_1]", v)
		}
	}
	if !slices.Equal(first.header.Get("grpc-custom"), []string{"h"}) || !slices.Equal(first.trailer.Get("grpc-retry-pushback-ms"), []string{"5"}) {
		t.Errorf("first call: header %v trailer %v, want the handler's grpc- metadata", first.header, first.trailer)
	}
	if !r.replayed() || r.header.Get("grpc-custom") != nil || r.trailer.Get("grpc-retry-pushback-ms") != nil {
		t.Errorf("retry: replayed %v header %v trailer %v, want no grpc- metadata of the handler", r.replayed(), r.header, r.trailer)
	}
	wantRuns(t, b, 1)
}

// Metadata that the client's HTTP/2 layer refuses (a name with capitals,
// as a metadata.MD literal can hold, or a value with control characters),
// which gRPC sends as it is and which fails the first client's call with
// Internal, is refused to the handler with an Internal error and not sent,
// as gRPC refuses it to streaming handlers: the first client gets the
// handler's answer, and the retry the same. Values gRPC's clients accept
// (a tab, bytes over 0x7f) are sent and replayed as they are.
func TestInvalidMetadataIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		md   metadata.MD
	}{
		{"capital letters", metadata.MD{"X-Charge-Id": {"ch_1"}}},
		{"empty name", metadata.MD{"": {"ch_1"}}},
		{"newline", metadata.MD{"x-charge-id": {"ch\n1"}}},
		{"NUL", metadata.MD{"x-charge-id": {"ch\x001"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := setup(t, idemgrpc.Config{ReplayMetadata: []string{"x-charge-id"}})
			refused := make(chan error, 1)
			b.svc.spawn = func(ctx context.Context) { refused <- grpc.SetHeader(ctx, tc.md) }
			first := b.call(chargeMethod, amount(1), key("bad-md")...)
			if first.err != nil || first.header.Get("x-charge-id") != nil {
				t.Fatalf("first call: %v, header %v; want the response without the metadata", first.err, first.header)
			}
			if err := <-refused; status.Code(err) != codes.Internal {
				t.Errorf("SetHeader returned %v, want Internal", err)
			}
			r := b.call(chargeMethod, amount(1), key("bad-md")...)
			if r.err != nil || !r.replayed() || r.reply != first.reply || r.header.Get("x-charge-id") != nil {
				t.Fatalf("retry: %q %v replayed %v header %v, want %q replayed", r.reply, r.err, r.replayed(), r.header, first.reply)
			}
			wantRuns(t, b, 1)
		})
	}
	t.Run("tab and bytes over 0x7f", func(t *testing.T) {
		b := setup(t, idemgrpc.Config{ReplayMetadata: []string{"x-charge-id"}})
		b.svc.header = metadata.Pairs("x-charge-id", "ch\t\xc3\xa91\xff")
		b.svc.strictMD = true
		for range 2 {
			r := b.call(chargeMethod, amount(1), key("odd-md")...)
			if r.err != nil || !slices.Equal(r.header.Get("x-charge-id"), []string{"ch\t\xc3\xa91\xff"}) {
				t.Fatalf("call: %v, header %q", r.err, r.header.Get("x-charge-id"))
			}
		}
		wantRuns(t, b, 1)
	})
}
