package idemgrpc_test

import (
	"math"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/idemgo/idem/contrib/idemgrpc"
	"github.com/idemgo/idem/store/memstore"
)

// The service Anys, registered only as a grpc.ServiceDesc: Put takes a
// google.protobuf.Any, Report a google.rpc.Status (whose details are
// Anys).
const (
	putMethod    = "/idemgrpc.test.Anys/Put"
	reportMethod = "/idemgrpc.test.Anys/Report"
)

// structAny is a google.protobuf.Any holding the google.protobuf.Struct
// {"a": 1, "b": 2}, its map entries on the wire in the order given, as
// two clients (or two attempts of one, marshalling its map anew each
// time) may send them.
func structAny(bFirst bool) *anypb.Any {
	entry := func(k string, v float64) []byte {
		value := protowire.AppendFixed64(protowire.AppendTag(nil, 2, protowire.Fixed64Type), math.Float64bits(v))
		return field(field(nil, 1, []byte(k)), 2, value)
	}
	a, b := field(nil, 1, entry("a", 1)), field(nil, 1, entry("b", 2))
	if bFirst {
		a, b = b, a
	}
	return &anypb.Any{TypeUrl: "type.googleapis.com/google.protobuf.Struct", Value: append(a, b...)}
}

// A message packed in a google.protobuf.Any, of a type the server knows,
// counts in the fingerprint by its content, as the request's own fields
// do: the order of its map entries on the wire does not, at the top of
// the request, within a message, or in an Any within an Any. A retry
// whose client marshalled the packed message again is replayed, not
// refused as another request; another content is still a mismatch.
func TestFingerprintOfAnyIsItsContent(t *testing.T) {
	s, err := memstore.New(memstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ic, err := idemgrpc.New(idemgrpc.Config{Store: s})
	if err != nil {
		t.Fatal(err)
	}
	svc := &payments{}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(recoverPanics, ic))
	srv.RegisterService(&grpc.ServiceDesc{
		ServiceName: "idemgrpc.test.Anys",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{
			unaryMethod("Put", putMethod, func() proto.Message { return new(anypb.Any) }, "put"),
			unaryMethod("Report", reportMethod, func() proto.Message { return new(status.Status) }, "report"),
		},
	}, svc)
	_, dial := serveBufconn(t, srv)
	conn := dial()

	nested := func(bFirst bool) *anypb.Any {
		inner, err := anypb.New(&status.Status{Code: 3, Details: []*anypb.Any{structAny(bFirst)}})
		if err != nil {
			t.Fatal(err)
		}
		return inner
	}
	for _, tc := range []struct {
		name, method string
		first, retry proto.Message
	}{
		{"top-level Any", putMethod, structAny(false), structAny(true)},
		{"Any in a message", reportMethod, &status.Status{Details: []*anypb.Any{structAny(false)}}, &status.Status{Details: []*anypb.Any{structAny(true)}}},
		{"Any in an Any", putMethod, nested(false), nested(true)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runs := svc.runs.Load()
			k := "any " + tc.name
			wantOK(t, invoke(t.Context(), conn, tc.method, tc.first, key(k)...))
			r := invoke(t.Context(), conn, tc.method, tc.retry, key(k)...)
			if r.err != nil || !r.replayed() {
				t.Errorf("retry with the same content, map entries in another order: %v, replayed %v; want the replay", r.err, r.replayed())
			}
			if got := svc.runs.Load() - runs; got != 1 {
				t.Errorf("the handler ran %d times, want 1", got)
			}
		})
	}
	other := structAny(false)
	other.Value = append(other.Value, field(nil, 1, field(nil, 1, []byte("c")))...)
	wantError(t, invoke(t.Context(), conn, putMethod, other, key("any top-level Any")...), codes.FailedPrecondition, idemgrpc.ReasonKeyReused)
}
