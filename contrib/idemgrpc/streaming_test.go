package idemgrpc_test

import (
	"io"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/idemgo/idem/contrib/idemgrpc"
	"github.com/idemgo/idem/store/memstore"
)

// openStream runs one streaming call of method with the outgoing metadata
// md (name, value pairs): it sends one message ("x") and reads until the
// stream ends, and returns the messages read and the error that ended it
// (nil for a clean end).
func openStream(t *testing.T, conn *grpc.ClientConn, method string, client, server bool, md ...string) ([]string, error) {
	t.Helper()
	ctx := metadata.AppendToOutgoingContext(t.Context(), md...)
	s, err := conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: client, ServerStreams: server}, method)
	if err != nil {
		return nil, err
	}
	// A refused stream may have ended before the message is sent: SendMsg
	// then returns io.EOF, and RecvMsg the status.
	if err := s.SendMsg(wrapperspb.String("x")); err != nil && err != io.EOF {
		return nil, err
	}
	_ = s.CloseSend()
	var got []string
	for {
		out := new(wrapperspb.StringValue)
		if err := s.RecvMsg(out); err == io.EOF {
			return got, nil
		} else if err != nil {
			return got, err
		}
		got = append(got, out.GetValue())
	}
}

// The stream interceptor (NewStream) refuses, with Unimplemented and the
// reason IDEMPOTENCY_KEY_UNSUPPORTED, a streaming call of a protected
// method that carries an idempotency key, valid or not, as text or as
// binary metadata, before its handler runs: the client learns that its key
// buys no protection instead of having its stream run again on each retry.
// Streams without a key, and those of methods Config.Protect leaves out,
// run as they are, even under RequireKey (a stream cannot be protected, so
// requiring a key of it would only make it fail).
func TestStreamInterceptorRefusesKeyedStreams(t *testing.T) {
	s, err := memstore.New(memstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	events := make(chan idemgrpc.Event, 100)
	cfg := idemgrpc.Config{
		Store:      s,
		RequireKey: true,
		Protect:    func(m string) bool { return m != watchMethod },
		OnEvent:    func(e idemgrpc.Event) { events <- e },
	}
	unary, err := idemgrpc.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := idemgrpc.NewStream(cfg)
	if err != nil {
		t.Fatal(err)
	}
	svc := &payments{}
	conn := serveDial(t, svc, grpc.ChainUnaryInterceptor(unary), grpc.ChainStreamInterceptor(stream))()

	for _, tc := range []struct {
		method         string
		client, server bool
	}{
		{collectMethod, true, false},
		{chatMethod, true, true},
	} {
		for name, md := range map[string][]string{
			"key":          key("s1"),
			"invalid key":  append(key("a"), key("b")...),
			"empty key":    key(""),
			"binary key":   {idemgrpc.KeyMetadata + "-bin", "s1"},
			"key and -bin": append(key("s1"), idemgrpc.KeyMetadata+"-bin", "s1"),
		} {
			runs := svc.runs.Load()
			got, err := openStream(t, conn, tc.method, tc.client, tc.server, md...)
			wantError(t, result{err: err}, codes.Unimplemented, idemgrpc.ReasonKeyUnsupported)
			if len(got) != 0 || svc.runs.Load() != runs {
				t.Errorf("%s with %s: the handler ran (%q)", tc.method, name, got)
			}
			select {
			case e := <-events:
				if e.FullMethod != tc.method || e.Outcome != idemgrpc.OutcomeKeyInvalid || e.Code != codes.Unimplemented || e.HandlerTime != 0 {
					t.Errorf("%s with %s: event %+v, want %s key_invalid Unimplemented, no handler time", tc.method, name, e, tc.method)
				}
			default:
				t.Errorf("%s with %s: no event", tc.method, name)
			}
		}
		// Without a key, the stream runs, RequireKey notwithstanding.
		got, err := openStream(t, conn, tc.method, tc.client, tc.server)
		if err != nil || len(got) != 1 {
			t.Errorf("%s without a key: %q, %v; want one reply", tc.method, got, err)
		}
	}
	// A method Config.Protect leaves out runs with a key, each time.
	for range 2 {
		got, err := openStream(t, conn, watchMethod, false, true, key("s1")...)
		if err != nil || len(got) != 1 {
			t.Errorf("%s with a key, unprotected: %q, %v; want one reply", watchMethod, got, err)
		}
	}
	if len(events) != 0 {
		t.Errorf("%d events for streams that ran; want events only for refusals", len(events))
	}
	// The unary interceptor is unaffected.
	wantOK(t, invoke(t.Context(), conn, chargeMethod, amount(1), key("u1")...))
	if r := invoke(t.Context(), conn, chargeMethod, amount(1), key("u1")...); r.err != nil || !r.replayed() {
		t.Errorf("unary retry: %v, replayed %v; want the replay", r.err, r.replayed())
	}
}

// NewStream validates its Config as New does; StreamServerInterceptor
// panics where New would return an error.
func TestNewStreamValidatesConfig(t *testing.T) {
	if _, err := idemgrpc.NewStream(idemgrpc.Config{}); err == nil {
		t.Error("NewStream without a Store: no error")
	}
	defer func() {
		if recover() == nil {
			t.Error("StreamServerInterceptor without a Store did not panic")
		}
	}()
	idemgrpc.StreamServerInterceptor(idemgrpc.Config{})
}
