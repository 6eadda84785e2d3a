package idemgrpc_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/idemgo/idem/contrib/idemgrpc"
	"github.com/idemgo/idem/store/memstore"
)

// A status code beyond those gRPC defines (0–16), which a handler may
// return and gRPC sends as it is, is never recorded, whatever
// Config.StoreCode says: the retry runs again and gets the handler's code,
// not an Internal error for a record no replay can read.
func TestH12UnknownCodeIsNotRecorded(t *testing.T) {
	b := setup(t, idemgrpc.Config{StoreCode: func(codes.Code) bool { return true }})
	b.svc.err = status.Error(codes.Code(99), "odd")
	for i := range 2 {
		r := b.call(chargeMethod, amount(1), key("odd")...)
		if r.code() != codes.Code(99) || r.replayed() {
			t.Fatalf("call %d: %v replayed %v, want code 99 from the handler", i, r.err, r.replayed())
		}
		if e := <-b.events; e.Outcome != idemgrpc.OutcomeReleased || e.Code != codes.Code(99) || e.Err == nil {
			t.Errorf("call %d: event %+v, want released, code 99, with why", i, e)
		}
	}
	wantRuns(t, b, 2)
}

// rawCodec sends a request's wire form as the test builds it, byte for
// byte, and reads the response's.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return v.([]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*(v.(*[]byte)) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

// sendRaw calls method with the request wire form raw and key k.
func sendRaw(b *bundle, method string, raw []byte, k string) result {
	var out []byte
	var r result
	ctx := metadata.AppendToOutgoingContext(context.Background(), key(k)...)
	r.err = b.conn.Invoke(ctx, method, raw, &out, grpc.ForceCodec(rawCodec{}), grpc.Header(&r.header))
	r.reply = string(out)
	return r
}

// field appends field num to b with value v: a varint for a uint64, a
// length-delimited field for a []byte.
func field(b []byte, num protowire.Number, v any) []byte {
	switch v := v.(type) {
	case uint64:
		return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), v)
	case []byte:
		return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), v)
	}
	panic("field: unsupported value")
}

// TestH7FingerprintWireForm pins what of a request counts in its
// fingerprint, which is its deterministic wire form as the server parsed
// it: the order of known fields on the wire, the order of map entries, and
// a field without presence sent with its default value (which parses as
// unset) do not count; unknown fields count byte for byte, in the order
// they arrived.
func TestH7FingerprintWireForm(t *testing.T) {
	b := setup(t, idemgrpc.Config{})
	same := func(k string, raws ...[]byte) {
		t.Helper()
		for i, raw := range raws {
			r := sendRaw(b, echoMethod, raw, k)
			if r.err != nil || r.replayed() != (i > 0) {
				t.Errorf("%s, form %d (%x): %v replayed %v, want the same request", k, i, raw, r.err, r.replayed())
			}
		}
	}
	// google.protobuf.StringValue: value = 1 (no presence).
	same("default", nil, field(nil, 1, []byte{}))
	// Unknown fields 5 and 6, in the same order.
	unknown := field(field(field(nil, 1, []byte("x")), 5, uint64(1)), 6, uint64(2))
	same("unknown", unknown, unknown)
	swapped := field(field(field(nil, 1, []byte("x")), 6, uint64(2)), 5, uint64(1))
	wantError(t, sendRaw(b, echoMethod, swapped, "unknown"), codes.FailedPrecondition, idemgrpc.ReasonKeyReused)

	// google.protobuf.Struct: map<string, Value> fields = 1, each entry
	// key = 1, value = 2; Value.number_value = 2 (a double).
	num := func(f float64) []byte {
		return protowire.AppendFixed64(protowire.AppendTag(nil, 2, protowire.Fixed64Type), math.Float64bits(f))
	}
	entry := func(k string, v float64, valueFirst bool) []byte {
		if valueFirst {
			return field(field(nil, 2, num(v)), 1, []byte(k))
		}
		return field(field(nil, 1, []byte(k)), 2, num(v))
	}
	ab := field(field(nil, 1, entry("a", 1, false)), 1, entry("b", 2, false))
	ba := field(field(nil, 1, entry("b", 2, true)), 1, entry("a", 1, true))
	for i, raw := range [][]byte{ab, ba} {
		r := sendRaw(b, chargeMethod, raw, "fields")
		if r.err != nil || r.replayed() != (i > 0) {
			t.Errorf("Struct form %d (%x): %v replayed %v, want the same request", i, raw, r.err, r.replayed())
		}
	}
}

// Metadata built by hand (metadata.MD{...}, as in-process callers and
// tests do) may have names that are not lower-case; gRPC's transports
// never deliver such names, but metadata.ValueFromIncomingContext reads
// them all the same, and so does the interceptor: a key under
// "Idempotency-Key" protects the call instead of letting it run
// unprotected, and one under "Idempotency-Key-Bin" is rejected.
func TestH3KeyMetadataNameCase(t *testing.T) {
	s, _ := memstore.New(memstore.Config{})
	ic, _ := idemgrpc.New(idemgrpc.Config{Store: s, RequireKey: true})
	runs := 0
	handler := func(context.Context, any) (any, error) {
		runs++
		return wrapperspb.String(fmt.Sprint("run ", runs)), nil
	}
	info := &grpc.UnaryServerInfo{FullMethod: chargeMethod}
	for i := range 2 {
		ctx := metadata.NewIncomingContext(context.Background(), metadata.MD{"Idempotency-Key": {"upper"}})
		resp, err := ic(ctx, amount(1), info, handler)
		if err != nil || resp.(*wrapperspb.StringValue).GetValue() != "run 1" {
			t.Fatalf("call %d: %v %v, want the first run's response", i, resp, err)
		}
	}
	if runs != 1 {
		t.Errorf("the handler ran %d times, want 1", runs)
	}
	ctx := metadata.NewIncomingContext(context.Background(), metadata.MD{"Idempotency-Key-Bin": {"upper"}})
	_, err := ic(ctx, amount(1), info, handler)
	wantError(t, result{err: err}, codes.InvalidArgument, idemgrpc.ReasonKeyInvalid)
}

// A Config.KeyScope answer longer than a scope may be (128 bytes) fails the
// call with Internal before the handler runs, as the docs say; 128 bytes
// is a scope.
func TestKeyScopeLimit(t *testing.T) {
	for _, n := range []int{128, 129} {
		b := setup(t, idemgrpc.Config{KeyScope: func(context.Context) string { return strings.Repeat("s", n) }})
		r := b.call(chargeMethod, amount(1), key("k")...)
		if n <= 128 {
			wantOK(t, r)
			wantRuns(t, b, 1)
			continue
		}
		wantError(t, r, codes.Internal, idemgrpc.ReasonInternal)
		wantRuns(t, b, 0)
	}
}
