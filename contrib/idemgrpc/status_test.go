package idemgrpc_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/idemgo/idem/contrib/idemgrpc"
	"github.com/idemgo/idem/store/memstore"
)

// A handler error whose message is not valid UTF-8 reaches the client as
// gRPC-go sends it, each invalid byte replaced with U+FFFD and without the
// details (which gRPC cannot marshal with such a message): so is it
// recorded, and the retry gets the same code, message bytes and details
// without the handler running again.
func TestInvalidUTF8StatusMessageReplayed(t *testing.T) {
	for _, tc := range []struct {
		name    string
		details bool
	}{{"plain", false}, {"with details", true}} {
		t.Run(tc.name, func(t *testing.T) {
			b := setup(t, idemgrpc.Config{})
			st := status.New(codes.NotFound, "no account \xff\xfe here \xe2\x82")
			if tc.details {
				var err error
				if st, err = st.WithDetails(&errdetails.ErrorInfo{Reason: "NO_ACCOUNT", Domain: "example.com"}); err != nil {
					t.Fatal(err)
				}
			}
			b.svc.err = st.Err()
			first := b.call(chargeMethod, amount(1), key("utf8")...)
			fst := status.Convert(first.err)
			const want = "no account \ufffd\ufffd here \ufffd\ufffd"
			if fst.Code() != codes.NotFound || fst.Message() != want || len(fst.Details()) != 0 {
				t.Fatalf("first call: %v %q %v, want NotFound %q without details (as gRPC-go sends it)", fst.Code(), fst.Message(), fst.Details(), want)
			}
			for range 2 {
				r := b.call(chargeMethod, amount(1), key("utf8")...)
				rst := status.Convert(r.err)
				if !r.replayed() || rst.Code() != fst.Code() || rst.Message() != fst.Message() || len(rst.Details()) != 0 {
					t.Fatalf("retry: %v %q %v replayed %v; want the first answer replayed", rst.Code(), rst.Message(), rst.Details(), r.replayed())
				}
			}
			wantRuns(t, b, 1)
		})
	}
}

// okStatusError is an error whose status is OK, which gRPC sends as such,
// without the response message.
type okStatusError struct{}

func (okStatusError) Error() string              { return "ok, but an error" }
func (okStatusError) GRPCStatus() *status.Status { return status.New(codes.OK, "") }

// A handler that returns a response together with an error whose status
// is OK gets no message to its client (gRPC sends the OK status alone, which
// the client reads as an error): its outcome is not recorded as that
// response but released, and the retry runs again and gets what the first
// client got.
func TestResponseWithOKStatusErrorIsNotReplayedAsTheResponse(t *testing.T) {
	s, err := memstore.New(memstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ic, err := idemgrpc.New(idemgrpc.Config{Store: s})
	if err != nil {
		t.Fatal(err)
	}
	okErr := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		resp, err := handler(ctx, req)
		if err != nil {
			return nil, err
		}
		return resp, okStatusError{}
	}
	svc := &payments{}
	conn := serveDial(t, svc, grpc.ChainUnaryInterceptor(ic, okErr))()
	first := invoke(context.Background(), conn, chargeMethod, amount(1), key("okerr")...)
	if first.err == nil {
		t.Fatalf("first call answered %q, want the error gRPC gives a call without a response message", first.reply)
	}
	r := invoke(context.Background(), conn, chargeMethod, amount(1), key("okerr")...)
	if r.code() != first.code() || r.reply != first.reply {
		t.Fatalf("retry: %q %v replayed %v; the first call got %q %v", r.reply, r.err, r.replayed(), first.reply, first.err)
	}
	if r.replayed() || svc.runs.Load() != 2 {
		t.Errorf("retry replayed %v after %d runs; want the outcome released and the handler run again", r.replayed(), svc.runs.Load())
	}
}

// An error wrapping a status is sent by gRPC with the status's code and
// details and the wrapping error's whole message: so is it recorded and
// replayed.
func TestWrappedStatusErrorReplayed(t *testing.T) {
	b := setup(t, idemgrpc.Config{})
	inner, err := status.New(codes.NotFound, "no such customer").WithDetails(&errdetails.ResourceInfo{ResourceType: "customer", ResourceName: "cus_1"})
	if err != nil {
		t.Fatal(err)
	}
	b.svc.err = fmt.Errorf("charging: %w", inner.Err())
	first := b.call(chargeMethod, amount(1), key("wrapped")...)
	fst := status.Convert(first.err)
	if fst.Code() != codes.NotFound || fst.Message() != b.svc.err.Error() || len(fst.Details()) != 1 {
		t.Fatalf("first call: %v", fst.Proto())
	}
	r := b.call(chargeMethod, amount(1), key("wrapped")...)
	if !r.replayed() || !proto.Equal(status.Convert(r.err).Proto(), fst.Proto()) {
		t.Fatalf("retry: %v replayed %v, want %v replayed", status.Convert(r.err).Proto(), r.replayed(), fst.Proto())
	}
	wantRuns(t, b, 1)
}

// A handler may set the trailer grpc-status-details-bin itself. gRPC sends
// it when the status it answers with has no details of its own, and the
// client then reads its status from it: the status it carries when its code
// is the answer's, Internal when it is another. The retry gets the same
// status as the first client, as it gets from a server without the
// interceptor, without the handler running again.
func TestHandlerStatusDetailsTrailerReplayed(t *testing.T) {
	st, err := status.New(codes.NotFound, "no such customer").WithDetails(&errdetails.ResourceInfo{ResourceType: "customer"})
	if err != nil {
		t.Fatal(err)
	}
	bin, err := proto.Marshal(st.Proto())
	if err != nil {
		t.Fatal(err)
	}
	withDetails, err := status.New(codes.NotFound, "not found").WithDetails(&errdetails.ErrorInfo{Reason: "OWN"})
	if err != nil {
		t.Fatal(err)
	}
	// gRPC drops these details, which do not marshal with the message.
	notUTF8, err := status.New(codes.NotFound, "not found \xff").WithDetails(&errdetails.ErrorInfo{Reason: "OWN"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"error without details", status.Error(codes.NotFound, "not found")},
		{"error with details", withDetails.Err()},
		{"error with details, message not UTF-8", notUTF8.Err()},
		{"response", nil},
		{"error of another code", status.Error(codes.InvalidArgument, "bad")},
		{"error of another code, malformed trailer", status.Error(codes.InvalidArgument, "bad")},
		{"error of another code, two trailers", status.Error(codes.InvalidArgument, "bad")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			trailer := metadata.Pairs("grpc-status-details-bin", string(bin))
			switch {
			case strings.HasSuffix(tc.name, "malformed trailer"):
				trailer = metadata.Pairs("grpc-status-details-bin", "\xff\xff")
			case strings.HasSuffix(tc.name, "two trailers"):
				trailer.Append("grpc-status-details-bin", string(bin))
			}
			plain := invoke(context.Background(), serveDial(t, &payments{err: tc.err, trailer: trailer})(), chargeMethod, amount(1))
			b := setup(t, idemgrpc.Config{})
			b.svc.err, b.svc.trailer = tc.err, trailer
			first := b.call(chargeMethod, amount(1), key("details")...)
			firstEvent := <-b.events
			r := b.call(chargeMethod, amount(1), key("details")...)
			replayEvent := <-b.events
			for i, got := range []result{first, r} {
				if got.code() != plain.code() || !proto.Equal(status.Convert(got.err).Proto(), status.Convert(plain.err).Proto()) {
					t.Errorf("got %v, want %v as without the interceptor", status.Convert(got.err).Proto(), status.Convert(plain.err).Proto())
				}
				if e := []idemgrpc.Event{firstEvent, replayEvent}[i]; e.Code != got.code() {
					t.Errorf("event %+v, want the code %v the client read", e, got.code())
				}
			}
			if !r.replayed() {
				t.Error("retry not replayed")
			}
			wantRuns(t, b, 1)
		})
	}
}
