package idemgrpc_test

import (
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/idemgo/idem/contrib/idemgrpc"
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
