package idemgrpc_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/contrib/idemgrpc"
	"github.com/idemgo/idem/store/memstore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func wantRuns(t *testing.T, b *bundle, n int) {
	t.Helper()
	if got := int(b.svc.runs.Load()); got != n {
		t.Fatalf("handler ran %d times, want %d", got, n)
	}
}

func wantOK(t *testing.T, r result) {
	t.Helper()
	if r.err != nil {
		t.Fatalf("call failed: %v", r.err)
	}
}

// wantError checks the code of r's error and the reason of its ErrorInfo
// detail, and returns its details.
func wantError(t *testing.T, r result, code codes.Code, reason string) []any {
	t.Helper()
	st := status.Convert(r.err)
	if st.Code() != code {
		t.Fatalf("code = %v (%v), want %v", st.Code(), r.err, code)
	}
	details := st.Details()
	for _, d := range details {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			if info.GetReason() != reason || info.GetDomain() != idemgrpc.ErrorDomain {
				t.Errorf("ErrorInfo = %v, want reason %s in %s", info, reason, idemgrpc.ErrorDomain)
			}
			return details
		}
	}
	t.Errorf("no ErrorInfo detail in %v", details)
	return details
}

func TestH1H5ReplayWithReplayedHeader(t *testing.T) {
	b := setup(t, idemgrpc.Config{})
	first := b.call(chargeMethod, amount(100), key(`"k1"`)...)
	wantOK(t, first)
	if first.replayed() || first.reply != "charge 1: 100" {
		t.Fatalf("first call: %q, replayed %v", first.reply, first.replayed())
	}
	for i := range 10 {
		k := `k1` // the raw form is the same key as the sf-string
		if i%2 == 1 {
			k = `"k1"`
		}
		r := b.call(chargeMethod, amount(100), key(k)...)
		wantOK(t, r)
		if !r.replayed() || r.reply != first.reply {
			t.Fatalf("retry %d: %q, replayed %v; want %q replayed", i, r.reply, r.replayed(), first.reply)
		}
	}
	wantRuns(t, b, 1)
}

func TestH2MissingKey(t *testing.T) {
	t.Run("required", func(t *testing.T) {
		b := setup(t, idemgrpc.Config{RequireKey: true})
		wantError(t, b.call(chargeMethod, amount(1)), codes.InvalidArgument, idemgrpc.ReasonKeyMissing)
		wantRuns(t, b, 0)
	})
	t.Run("optional", func(t *testing.T) {
		b := setup(t, idemgrpc.Config{})
		for range 2 {
			r := b.call(chargeMethod, amount(1))
			wantOK(t, r)
			if r.replayed() {
				t.Fatal("a call without a key was replayed")
			}
		}
		wantRuns(t, b, 2)
		if e := <-b.events; e.Outcome != idemgrpc.OutcomePassThrough {
			t.Errorf("event %v, want pass_through", e.Outcome)
		}
	})
}

func TestH3InvalidKeys(t *testing.T) {
	b := setup(t, idemgrpc.Config{})
	k255 := strings.Repeat("k", 255)
	for _, tc := range []struct {
		name string
		md   []string
	}{
		{"empty", key("")},
		{"blank", key("   ")},
		{"256 bytes", key(k255 + "k")},
		{"two values", append(key("a"), key("b")...)},
		{"malformed sf-string", key(`"abc`)},
		{"comma", key("a,b")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, b.call(chargeMethod, amount(1), tc.md...), codes.InvalidArgument, idemgrpc.ReasonKeyInvalid)
		})
	}
	wantRuns(t, b, 0)
	wantOK(t, b.call(chargeMethod, amount(1), key(k255)...))
	wantOK(t, b.call(chargeMethod, amount(1), key("Case")...))
	if r := b.call(chargeMethod, amount(1), key("case")...); r.replayed() {
		t.Error("keys are not case-sensitive")
	}
	wantRuns(t, b, 3)
}

// gRPC clients refuse to send control characters in metadata; other
// clients may, and the interceptor rejects them. The interceptor is called
// directly here, as a server would.
func TestH3ControlCharacters(t *testing.T) {
	s, _ := memstore.New(memstore.Config{})
	ic, _ := idemgrpc.New(idemgrpc.Config{Store: s})
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs(idemgrpc.KeyMetadata, "a\x01b"))
	ran := false
	_, err := ic(ctx, amount(1), &grpc.UnaryServerInfo{FullMethod: chargeMethod}, func(context.Context, any) (any, error) {
		ran = true
		return wrapperspb.String(""), nil
	})
	wantError(t, result{err: err}, codes.InvalidArgument, idemgrpc.ReasonKeyInvalid)
	if ran {
		t.Error("the handler ran")
	}
}

// Requests that are not protocol buffers messages (another codec) cannot
// be fingerprinted: Internal, and the handler does not run.
func TestNonProtoRequest(t *testing.T) {
	s, _ := memstore.New(memstore.Config{})
	ic, _ := idemgrpc.New(idemgrpc.Config{Store: s})
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs(idemgrpc.KeyMetadata, "k"))
	ran := false
	_, err := ic(ctx, map[string]any{"amount": 1}, &grpc.UnaryServerInfo{FullMethod: chargeMethod}, func(context.Context, any) (any, error) {
		ran = true
		return nil, nil
	})
	wantError(t, result{err: err}, codes.Internal, idemgrpc.ReasonInternal)
	if ran {
		t.Error("the handler ran")
	}
}

func TestH4UnprotectedMethodsPassThrough(t *testing.T) {
	t.Run("idempotency_level", func(t *testing.T) {
		b := setup(t, idemgrpc.Config{RequireKey: true})
		for range 3 {
			r := b.call(lookupMethod, wrapperspb.String("ch_1"), key("same")...)
			wantOK(t, r)
			if r.replayed() {
				t.Fatal("a NO_SIDE_EFFECTS method was replayed")
			}
		}
		wantOK(t, b.call(lookupMethod, wrapperspb.String("ch_1"))) // no key required either
		wantRuns(t, b, 4)
		if len(b.events) != 0 {
			t.Errorf("%d events for unprotected calls", len(b.events))
		}
	})
	t.Run("Config.Protect", func(t *testing.T) {
		b := setup(t, idemgrpc.Config{Protect: func(m string) bool { return m != refundMethod }})
		for range 2 {
			if r := b.call(refundMethod, amount(1), key("same")...); r.err != nil || r.replayed() {
				t.Fatalf("refund: %v, replayed %v", r.err, r.replayed())
			}
		}
		wantRuns(t, b, 2)
	})
	for method, want := range map[string]bool{chargeMethod: true, lookupMethod: false, echoMethod: true, "/no.Such/Method": true, "garbage": true} {
		if got := idemgrpc.ProtectUnlessIdempotent(method); got != want {
			t.Errorf("ProtectUnlessIdempotent(%q) = %v, want %v", method, got, want)
		}
	}
}

func TestH5ReplayMetadata(t *testing.T) {
	b := setup(t, idemgrpc.Config{ReplayMetadata: []string{"X-Charge-Id", "x-ledger-bin"}})
	b.svc.header = metadata.Pairs("x-charge-id", "ch_1", "x-internal", "not allowlisted")
	b.svc.trailer = metadata.Pairs("x-ledger-bin", "\x00\xff\x01", "authorization", "leaked")
	first := b.call(chargeMethod, amount(5), key("k5")...)
	wantOK(t, first)
	if first.header.Get("x-internal") == nil {
		t.Fatalf("first response has no x-internal header: %v", first.header)
	}
	r := b.call(chargeMethod, amount(5), key("k5")...)
	wantOK(t, r)
	if !r.replayed() {
		t.Fatal("not replayed")
	}
	if got := r.header.Get("x-charge-id"); len(got) != 1 || got[0] != "ch_1" {
		t.Errorf("x-charge-id = %q, want ch_1", got)
	}
	if got := r.trailer.Get("x-ledger-bin"); len(got) != 1 || got[0] != "\x00\xff\x01" {
		t.Errorf("x-ledger-bin = %q, want the original bytes", got)
	}
	if r.header.Get("x-internal") != nil || r.trailer.Get("authorization") != nil {
		t.Errorf("metadata outside the allowlist replayed: header %v trailer %v", r.header, r.trailer)
	}
	wantRuns(t, b, 1)
}

func TestH8MismatchLeavesRecord(t *testing.T) {
	b := setup(t, idemgrpc.Config{})
	first := b.call(chargeMethod, amount(4242), key("k8")...)
	wantOK(t, first)
	for name, r := range map[string]result{
		"request": b.call(chargeMethod, amount(1), key("k8")...),
		"method":  b.call(refundMethod, amount(4242), key("k8")...),
	} {
		t.Run(name, func(t *testing.T) {
			wantError(t, r, codes.FailedPrecondition, idemgrpc.ReasonKeyReused)
			if msg := status.Convert(r.err).Message(); strings.Contains(msg, "4242") || strings.Contains(msg, "charge 1") {
				t.Errorf("the error leaks the original: %s", msg)
			}
		})
	}
	wantRuns(t, b, 1)
	if r := b.call(chargeMethod, amount(4242), key("k8")...); !r.replayed() || r.reply != first.reply {
		t.Errorf("the original no longer replays: %q %v", r.reply, r.err)
	}
}

// Map fields are compared by content: the request is marshalled
// deterministically.
func TestH7MapOrderDoesNotMatter(t *testing.T) {
	b := setup(t, idemgrpc.Config{})
	for range 20 {
		// Each call builds its map anew; Go randomises iteration order.
		if r := b.call(chargeMethod, amount(7), key("k7")...); r.err != nil {
			t.Fatal(r.err)
		}
	}
	wantRuns(t, b, 1)
}

func TestH9H10InFlight(t *testing.T) {
	b := setup(t, idemgrpc.Config{})
	b.svc.hold = make(chan struct{})
	b.svc.started = make(chan struct{}, 1)
	done := make(chan result)
	go func() { done <- b.call(chargeMethod, amount(9), key("k9")...) }()
	<-b.svc.started
	// H9: another request while the original runs is a mismatch.
	wantError(t, b.call(chargeMethod, amount(10), key("k9")...), codes.FailedPrecondition, idemgrpc.ReasonKeyReused)
	// H10: the same request is Aborted, with a retry delay.
	r := b.call(chargeMethod, amount(9), key("k9")...)
	var retry *errdetails.RetryInfo
	for _, d := range wantError(t, r, codes.Aborted, idemgrpc.ReasonInProgress) {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			retry = ri
		}
	}
	if retry == nil || retry.GetRetryDelay().AsDuration() < time.Second {
		t.Errorf("RetryInfo = %v, want a delay of at least 1s", retry)
	}
	// gRPC's own retries read the delay from the pushback trailer.
	if got, want := r.trailer.Get("grpc-retry-pushback-ms"), strconv.FormatInt(retry.GetRetryDelay().AsDuration().Milliseconds(), 10); len(got) != 1 || got[0] != want {
		t.Errorf("grpc-retry-pushback-ms = %q, want [%s]", got, want)
	}
	if !strings.Contains(status.Convert(r.err).Message(), "retry after") {
		t.Errorf("message %q does not give the delay", status.Convert(r.err).Message())
	}
	close(b.svc.hold)
	first := <-done
	wantOK(t, first)
	if r := b.call(chargeMethod, amount(9), key("k9")...); !r.replayed() || r.reply != first.reply {
		t.Errorf("after completion: %q %v, want the replay", r.reply, r.err)
	}
	wantRuns(t, b, 1)
}

func TestH10ConcurrentCallsRunOnce(t *testing.T) {
	b := setup(t, idemgrpc.Config{})
	const n = 25
	// The run that wins holds until every other call has been answered, so
	// that all n overlap it.
	b.svc.hold = make(chan struct{})
	release := sync.OnceFunc(func() { close(b.svc.hold) })
	defer release() // a failed check must not leave the run waiting
	results := make(chan result, n)
	start := make(chan struct{})
	for range n {
		go func() {
			<-start
			results <- b.call(chargeMethod, amount(10), key("k10")...)
		}()
	}
	close(start)
	for range n - 1 {
		wantError(t, <-results, codes.Aborted, idemgrpc.ReasonInProgress)
	}
	release()
	if r := <-results; r.err != nil || r.replayed() || r.reply != "charge 1: 10" {
		t.Errorf("the one run: %q (%v), replayed %v; want the handler's reply", r.reply, r.err, r.replayed())
	}
	wantRuns(t, b, 1)
	if r := b.call(chargeMethod, amount(10), key("k10")...); r.err != nil || !r.replayed() || r.reply != "charge 1: 10" {
		t.Errorf("a retry after the run: %q (%v), replayed %v; want the replay", r.reply, r.err, r.replayed())
	}
	wantRuns(t, b, 1)
}

func TestH12StoredCodes(t *testing.T) {
	withDetail, _ := status.New(codes.NotFound, "no such customer").WithDetails(&errdetails.ResourceInfo{ResourceType: "customer", ResourceName: "cus_1"})
	for _, tc := range []struct {
		name   string
		err    error
		stored bool
	}{
		{"NotFound with details", withDetail.Err(), true},
		{"InvalidArgument", status.Error(codes.InvalidArgument, "amount must be positive"), true},
		{"AlreadyExists", status.Error(codes.AlreadyExists, "exists"), true},
		{"PermissionDenied", status.Error(codes.PermissionDenied, "no"), true},
		{"FailedPrecondition", status.Error(codes.FailedPrecondition, "account closed"), true},
		{"OutOfRange", status.Error(codes.OutOfRange, "range"), true},
		{"Unimplemented (a server without the method yet)", status.Error(codes.Unimplemented, "later"), false},
		{"Unavailable", status.Error(codes.Unavailable, "try again"), false},
		{"DeadlineExceeded", status.Error(codes.DeadlineExceeded, "slow"), false},
		{"Aborted", status.Error(codes.Aborted, "conflict"), false},
		{"ResourceExhausted", status.Error(codes.ResourceExhausted, "quota"), false},
		{"Internal", status.Error(codes.Internal, "bug"), false},
		{"Unauthenticated", status.Error(codes.Unauthenticated, "who"), false},
		{"plain error (Unknown)", errors.New("boom"), false},
		{"context error (Canceled)", context.Canceled, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := setup(t, idemgrpc.Config{})
			b.svc.err = tc.err
			first := b.call(chargeMethod, amount(12), key("k12")...)
			retry := b.call(chargeMethod, amount(12), key("k12")...)
			if retry.replayed() != tc.stored {
				t.Fatalf("replayed = %v, want %v", retry.replayed(), tc.stored)
			}
			if !proto.Equal(status.Convert(first.err).Proto(), status.Convert(retry.err).Proto()) {
				t.Errorf("retry status %v, want %v", status.Convert(retry.err).Proto(), status.Convert(first.err).Proto())
			}
			want := 2
			if tc.stored {
				want = 1
			}
			wantRuns(t, b, want)
		})
	}
	t.Run("Config.StoreCode", func(t *testing.T) {
		b := setup(t, idemgrpc.Config{StoreCode: func(c codes.Code) bool { return c == codes.OK || c == codes.Unavailable }})
		b.svc.err = status.Error(codes.Unavailable, "down")
		b.call(chargeMethod, amount(1), key("k")...)
		if r := b.call(chargeMethod, amount(1), key("k")...); !r.replayed() || r.code() != codes.Unavailable {
			t.Errorf("retry: %v replayed %v, want the stored Unavailable", r.err, r.replayed())
		}
		wantRuns(t, b, 1)
	})
}

func TestH14RetentionExpiry(t *testing.T) {
	b := setup(t, idemgrpc.Config{Retention: time.Hour})
	b.call(chargeMethod, amount(14), key("k14")...)
	b.clock.Advance(time.Hour - time.Second)
	if r := b.call(chargeMethod, amount(14), key("k14")...); !r.replayed() {
		t.Fatal("not replayed within the retention")
	}
	b.clock.Advance(time.Second)
	if r := b.call(chargeMethod, amount(14), key("k14")...); r.replayed() || r.err != nil {
		t.Fatalf("after the retention: %v, replayed %v", r.err, r.replayed())
	}
	wantRuns(t, b, 2)
}

func TestH17ScopesAreIndependent(t *testing.T) {
	b := setup(t, idemgrpc.Config{})
	alice, bob := []string{"authorization", "Bearer alice"}, []string{"authorization", "Bearer bob"}
	wantOK(t, b.call(chargeMethod, amount(1), append(key("k17"), alice...)...))
	r := b.call(chargeMethod, amount(2), append(key("k17"), bob...)...)
	wantOK(t, r)
	if r.replayed() {
		t.Fatal("bob got alice's record")
	}
	ra := b.call(chargeMethod, amount(1), append(key("k17"), alice...)...)
	rb := b.call(chargeMethod, amount(2), append(key("k17"), bob...)...)
	if !ra.replayed() || !rb.replayed() || ra.reply != "charge 1: 1" || rb.reply != "charge 2: 2" {
		t.Errorf("replays: alice %q, bob %q", ra.reply, rb.reply)
	}
	wantRuns(t, b, 2)
}

// failingStore is an idem.Store whose backend is down.
type failingStore struct{ idem.Store }

func (failingStore) Begin(context.Context, idem.Key, idem.Request, *idem.BeginOpts) (idem.Outcome, error) {
	return idem.Outcome{}, idem.Unavailable(errors.New("connection refused"))
}

func TestH18StoreUnavailable(t *testing.T) {
	b := setup(t, idemgrpc.Config{Store: failingStore{}})
	r := b.call(chargeMethod, amount(1), key("k18")...)
	wantError(t, r, codes.Unavailable, idemgrpc.ReasonStoreUnavailable)
	wantRuns(t, b, 0)
	if got := r.trailer.Get("grpc-retry-pushback-ms"); len(got) != 1 || got[0] != "1000" {
		t.Errorf("grpc-retry-pushback-ms = %q, want [1000]", got)
	}
	if e := <-b.events; e.Outcome != idemgrpc.OutcomeStoreError || !errors.Is(e.Err, idem.ErrUnavailable) {
		t.Errorf("event %+v", e)
	}
	open := setup(t, idemgrpc.Config{Store: failingStore{}, FailOpen: true})
	wantOK(t, open.call(chargeMethod, amount(1), key("k18")...))
	wantRuns(t, open, 1)
}

func TestH19LargeResponsesNotStored(t *testing.T) {
	b := setup(t, idemgrpc.Config{MaxCapture: 64})
	b.svc.pad = 100
	for range 2 {
		r := b.call(chargeMethod, amount(19), key("k19")...)
		wantOK(t, r)
		if r.replayed() || len(r.reply) < 100 {
			t.Fatalf("reply of %d bytes, replayed %v", len(r.reply), r.replayed())
		}
	}
	wantRuns(t, b, 2)
	if e := <-b.events; e.Outcome != idemgrpc.OutcomeReleased || e.Err == nil {
		t.Errorf("event %+v, want released with the reason", e)
	}
}

// An error status over Config.MaxCapture bytes, in the wire form of its
// google.rpc.Status, is delivered but not recorded, as a response over it
// is: the key is released and the retry runs again.
func TestLargeErrorStatusNotStored(t *testing.T) {
	b := setup(t, idemgrpc.Config{MaxCapture: 64})
	msg := "no such card: " + strings.Repeat("x", 100)
	b.svc.err = status.Error(codes.NotFound, msg)
	for range 2 {
		r := b.call(chargeMethod, amount(1), key("big-err")...)
		if st := status.Convert(r.err); st.Code() != codes.NotFound || st.Message() != msg || r.replayed() {
			t.Fatalf("call: %v replayed %v, want the handler's NotFound, not replayed", r.err, r.replayed())
		}
		if e := <-b.events; e.Outcome != idemgrpc.OutcomeReleased || e.Code != codes.NotFound || e.Err == nil || !strings.Contains(e.Err.Error(), "MaxCapture") {
			t.Errorf("event %+v, want released with the reason", e)
		}
	}
	wantRuns(t, b, 2)
	// Under the limit, the same status is recorded.
	b.svc.err = status.Error(codes.NotFound, "no such card")
	b.call(chargeMethod, amount(1), key("small-err")...)
	if r := b.call(chargeMethod, amount(1), key("small-err")...); !r.replayed() || r.code() != codes.NotFound {
		t.Fatalf("retry of a small error: %v replayed %v, want it replayed", r.err, r.replayed())
	}
	wantRuns(t, b, 3)
}

// A panic releases the key and goes on to the recovery interceptor; the
// retry runs again and is recorded.
func TestPanicReleasesKey(t *testing.T) {
	b := setup(t, idemgrpc.Config{})
	b.svc.panics.Store(1)
	if r := b.call(chargeMethod, amount(1), key("p1")...); r.code() != codes.Internal || !strings.Contains(r.err.Error(), "boom") {
		t.Fatalf("panicking call: %v", r.err)
	}
	r := b.call(chargeMethod, amount(1), key("p1")...)
	wantOK(t, r)
	if r.replayed() {
		t.Fatal("the retry after a panic was replayed")
	}
	if r := b.call(chargeMethod, amount(1), key("p1")...); !r.replayed() {
		t.Fatal("the retry's result was not recorded")
	}
	wantRuns(t, b, 2)
}

// H21: a client that cancels does not cancel the handler; its result is
// recorded and the retry replays.
func TestH21ClientCancelDoesNotCancelHandler(t *testing.T) {
	b := setup(t, idemgrpc.Config{})
	b.svc.hold = make(chan struct{})
	b.svc.started = make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan result)
	go func() { done <- invoke(ctx, b.conn, chargeMethod, amount(21), key("k21")...) }()
	<-b.svc.started
	cancel()
	if r := <-done; r.code() != codes.Canceled {
		t.Fatalf("cancelled call: %v", r.err)
	}
	close(b.svc.hold)
	if e := <-b.events; e.Outcome != idemgrpc.OutcomeExecuted {
		t.Fatalf("event %+v, want executed", e)
	}
	if b.svc.sawCancel.Load() {
		t.Fatal("the handler's context was cancelled with the client's")
	}
	if r := b.call(chargeMethod, amount(21), key("k21")...); !r.replayed() || r.reply != "charge 1: 21" {
		t.Errorf("retry after cancelling: %q %v replayed %v", r.reply, r.err, r.replayed())
	}
	wantRuns(t, b, 1)
}

func TestReplayTypeResolution(t *testing.T) {
	t.Run("recorded type", func(t *testing.T) {
		// Unlisted has no registered descriptor: the recorded type rebuilds
		// the response.
		b := setup(t, idemgrpc.Config{})
		first := b.call(echoMethod, wrapperspb.String("hi"), key("e")...)
		r := b.call(echoMethod, wrapperspb.String("hi"), key("e")...)
		if first.err != nil || r.err != nil || !r.replayed() || r.reply != "echo 1: hi" {
			t.Fatalf("replay: %q %v replayed %v", r.reply, r.err, r.replayed())
		}
	})
	t.Run("Config.NewResponse", func(t *testing.T) {
		var asked []string
		b := setup(t, idemgrpc.Config{NewResponse: func(m string) proto.Message {
			asked = append(asked, m)
			if m == echoMethod {
				return new(wrapperspb.StringValue)
			}
			return nil // the registry's answer
		}})
		for _, m := range []string{echoMethod, chargeMethod} {
			var in proto.Message = wrapperspb.String("hi")
			if m == chargeMethod {
				in = amount(1)
			}
			b.call(m, in, key("n"+m)...)
			if r := b.call(m, in, key("n"+m)...); r.err != nil || !r.replayed() {
				t.Fatalf("%s replay: %v replayed %v", m, r.err, r.replayed())
			}
		}
		if len(asked) != 2 || asked[0] != echoMethod || asked[1] != chargeMethod {
			t.Errorf("NewResponse asked for %v", asked)
		}
	})
}

// A Config.NewResponse that returns a nil pointer of a message type
// returns no message, as if it returned nil: the registry's type is used.
// Decoding into the nil pointer would panic on every retry.
func TestNewResponseNilPointerIsNil(t *testing.T) {
	b := setup(t, idemgrpc.Config{NewResponse: func(string) proto.Message { return (*wrapperspb.StringValue)(nil) }})
	for _, m := range []string{chargeMethod, echoMethod} {
		var in proto.Message = wrapperspb.String("hi")
		if m == chargeMethod {
			in = amount(1)
		}
		wantOK(t, b.call(m, in, key("nilnew"+m)...))
		if r := b.call(m, in, key("nilnew"+m)...); r.err != nil || !r.replayed() || r.reply == "" {
			t.Errorf("%s replay: %q %v replayed %v", m, r.reply, r.err, r.replayed())
		}
	}
	wantRuns(t, b, 2)
}

// A recorded response is not decoded into a message of another type (the
// method's response type changed in a deploy, or Config.NewResponse
// answers another): protobuf would decode the bytes into it without
// complaint, and the retry would get a message that was never sent.
func TestReplayOfAnotherTypeIsInternal(t *testing.T) {
	var changed atomic.Bool
	b := setup(t, idemgrpc.Config{NewResponse: func(string) proto.Message {
		if changed.Load() {
			return new(wrapperspb.Int64Value)
		}
		return nil
	}})
	wantOK(t, b.call(echoMethod, wrapperspb.String("hi"), key("typed")...))
	changed.Store(true)
	r := b.call(echoMethod, wrapperspb.String("hi"), key("typed")...)
	wantError(t, r, codes.Internal, idemgrpc.ReasonInternal)
	wantRuns(t, b, 1)
}

func TestEvents(t *testing.T) {
	b := setup(t, idemgrpc.Config{})
	b.call(chargeMethod, amount(1), key("e")...)
	b.call(chargeMethod, amount(1), key("e")...)
	b.call(chargeMethod, amount(2), key("e")...)
	b.call(chargeMethod, amount(1), key("")...)
	b.call(lookupMethod, wrapperspb.String("x"), key("e")...)
	var got []string
	for len(b.events) > 0 {
		e := <-b.events
		if e.FullMethod != chargeMethod {
			t.Errorf("event for %s", e.FullMethod)
		}
		got = append(got, string(e.Outcome)+"/"+e.Code.String())
	}
	want := "executed/OK replayed/OK mismatch/FailedPrecondition key_invalid/InvalidArgument"
	if strings.Join(got, " ") != want {
		t.Errorf("events %v, want %s", got, want)
	}
}

func TestRecordHoldsNothingOfTheRequest(t *testing.T) {
	b := setup(t, idemgrpc.Config{NewResponse: func(string) proto.Message { return nil }})
	b.call(chargeMethod, amount(4242), key("r")...)
	k, _ := idem.ParseKey(idemgrpc.DefaultNamespace, "r")
	rec, err := b.store.Get(context.Background(), k)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(rec.Request, []byte("4242")) || !bytes.Contains(rec.Request, []byte(chargeMethod)) {
		t.Errorf("recorded request %s", rec.Request)
	}
}

func TestConfigValidation(t *testing.T) {
	s, _ := memstore.New(memstore.Config{})
	for name, cfg := range map[string]idemgrpc.Config{
		"no store":              {},
		"nil *memstore.Store":   {Store: (*memstore.Store)(nil)},
		"bad namespace":         {Store: s, Namespace: "Bad"},
		"negative capture":      {Store: s, MaxCapture: -1},
		"negative retention":    {Store: s, Retention: -1},
		"negative lease":        {Store: s, Lease: -1},
		"negative timeout":      {Store: s, StoreTimeout: -1},
		"bad metadata name":     {Store: s, ReplayMetadata: []string{"x id"}},
		"empty metadata name":   {Store: s, ReplayMetadata: []string{""}},
		"pseudo-header replays": {Store: s, ReplayMetadata: []string{":status"}},
	} {
		if _, err := idemgrpc.New(cfg); err == nil || !strings.HasPrefix(err.Error(), "idemgrpc: Config.") {
			t.Errorf("%s: New = %v, want an error naming the field", name, err)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("UnaryServerInterceptor did not panic on an invalid Config")
		}
	}()
	idemgrpc.UnaryServerInterceptor(idemgrpc.Config{})
}

// Config.ReplayMetadata naming gRPC's own metadata ("grpc-…"), which is
// never recorded (grpc-status-details-bin is, without being named), is
// refused with an error naming the field and the name, rather than
// ignored.
func TestReplayMetadataRefusesGRPCNames(t *testing.T) {
	s, _ := memstore.New(memstore.Config{})
	for _, name := range []string{"grpc-custom", "grpc-retry-pushback-ms", "GRPC-Status", "grpc-status-details-bin", "grpc-"} {
		_, err := idemgrpc.New(idemgrpc.Config{Store: s, ReplayMetadata: []string{"x-charge-id", name}})
		if err == nil || !strings.HasPrefix(err.Error(), "idemgrpc: Config.ReplayMetadata") || !strings.Contains(err.Error(), strconv.Quote(name)) {
			t.Errorf("ReplayMetadata %q: New = %v, want an error naming Config.ReplayMetadata and %q", name, err, name)
		}
	}
	if _, err := idemgrpc.New(idemgrpc.Config{Store: s, ReplayMetadata: []string{"x-grpc-id", "grpcx"}}); err != nil {
		t.Errorf("names that merely contain grpc refused: %v", err)
	}
}

// Config.ReplayMetadata naming metadata that is never recorded
// (credentials, cookies, transport metadata, the key and replay markers)
// is refused with an error naming the field and the name, as the HTTP
// middleware refuses such ReplayHeaders.
func TestReplayMetadataRefusesNeverRecorded(t *testing.T) {
	s, _ := memstore.New(memstore.Config{})
	for _, name := range []string{"authorization", "Authorization", "proxy-authorization", "cookie", "set-cookie",
		"content-type", "user-agent", "te", "host", idemgrpc.ReplayedMetadata, idemgrpc.KeyMetadata} {
		_, err := idemgrpc.New(idemgrpc.Config{Store: s, ReplayMetadata: []string{"x-charge-id", name}})
		if err == nil || !strings.HasPrefix(err.Error(), "idemgrpc: Config.ReplayMetadata") || !strings.Contains(err.Error(), strconv.Quote(name)) {
			t.Errorf("ReplayMetadata %q: New = %v, want an error naming Config.ReplayMetadata and %q", name, err, name)
		}
	}
}

// A client that cancels while its call runs: the handler goes on (H21), and
// the metadata it sets, which the stream now refuses, is recorded all the
// same and replayed to the retry.
func TestMetadataRecordedAfterTheClientLeft(t *testing.T) {
	b := setup(t, idemgrpc.Config{ReplayMetadata: []string{"x-charge-id"}})
	leaveWhileRunning(t, b, "left")
	if e := <-b.events; e.Outcome != idemgrpc.OutcomeExecuted {
		t.Fatalf("event %+v, want the call executed and recorded", e)
	}
	r := b.call(chargeMethod, amount(1), key("left")...)
	if !r.replayed() {
		t.Fatalf("retry not replayed: %v", r.err)
	}
	if h, tr := r.header.Get("x-charge-id"), r.trailer.Get("x-charge-id"); len(h) != 1 || h[0] != "ch_1" || len(tr) != 1 || tr[0] != "t_1" {
		t.Errorf("replayed header %v trailer %v, want [ch_1] and [t_1]", h, tr)
	}
}

// A client that cancels while its call runs, with no ReplayMetadata: the
// stream refuses the metadata the handler then sets, but that refusal,
// which only says that the client has gone, is not reported to the handler
// either, so that a handler that checks it does not fail work it has done:
// its outcome is recorded, and the retry does not run it again.
func TestH21MetadataRefusalHiddenAfterTheClientLeft(t *testing.T) {
	b := setup(t, idemgrpc.Config{})
	b.svc.strictMD = true
	leaveWhileRunning(t, b, "gone")
	if e := <-b.events; e.Outcome != idemgrpc.OutcomeExecuted || e.Code != codes.OK {
		t.Fatalf("event %+v, want the call executed and recorded", e)
	}
	if r := b.call(chargeMethod, amount(1), key("gone")...); !r.replayed() || r.reply != "charge 1: 1" {
		t.Errorf("retry: %q %v replayed %v", r.reply, r.err, r.replayed())
	}
	wantRuns(t, b, 1)
}

// A KeyScope that returns a scope keys cannot carry is an internal error,
// counted as such with the error in the event; the handler does not run.
func TestInvalidScopeIsInternal(t *testing.T) {
	b := setup(t, idemgrpc.Config{KeyScope: func(context.Context) string { return "bad\x01scope" }})
	r := b.call(chargeMethod, amount(1), key("scope")...)
	if r.code() != codes.Internal {
		t.Fatalf("call: %v, want Internal", r.err)
	}
	if e := <-b.events; e.Outcome != idemgrpc.OutcomeInternal || e.Err == nil {
		t.Errorf("event %+v, want OutcomeInternal with the error", e)
	}
	if n := b.svc.runs.Load(); n != 0 {
		t.Errorf("the handler ran %d times", n)
	}
}

// A handler that answers a nil message pointer sends the client an empty
// message, with OK: that is recorded and replayed like any response, and
// the handler does not run again.
func TestNilResponseIsRecorded(t *testing.T) {
	b := setup(t, idemgrpc.Config{})
	b.svc.nilReply = true
	wantOK(t, b.call(chargeMethod, amount(1), key("nil")...))
	r := b.call(chargeMethod, amount(1), key("nil")...)
	wantOK(t, r)
	if !r.replayed() || r.reply != "" {
		t.Errorf("retry: %q replayed %v, want the empty message replayed", r.reply, r.replayed())
	}
	wantRuns(t, b, 1)
}

// A handler that returns no message and no error (return nil, nil) sends
// the client an empty message, with OK, as gRPC does: that is recorded as
// the empty message of the method's response type and replayed, and the
// handler does not run again. Where the response type cannot be found
// (no registered descriptor, no Config.NewResponse), nothing can be
// replayed: the key is released, and the event says why.
func TestH12NoResponseIsRecorded(t *testing.T) {
	b := setup(t, idemgrpc.Config{})
	b.svc.noReply = true
	wantOK(t, b.call(chargeMethod, amount(1), key("none")...))
	if e := <-b.events; e.Outcome != idemgrpc.OutcomeExecuted || e.Code != codes.OK || e.Err != nil {
		t.Errorf("event %+v, want executed, OK", e)
	}
	r := b.call(chargeMethod, amount(1), key("none")...)
	wantOK(t, r)
	if !r.replayed() || r.reply != "" {
		t.Errorf("retry: %q replayed %v, want the empty message replayed", r.reply, r.replayed())
	}
	<-b.events
	wantRuns(t, b, 1)

	// Unlisted has no registered descriptor.
	wantOK(t, b.call(echoMethod, wrapperspb.String("x"), key("none-echo")...))
	if e := <-b.events; e.Outcome != idemgrpc.OutcomeReleased || e.Code != codes.OK || e.Err == nil {
		t.Errorf("event %+v, want released, OK, with why", e)
	}
	if r := b.call(echoMethod, wrapperspb.String("x"), key("none-echo")...); r.err != nil || r.replayed() {
		t.Errorf("retry of an unrecordable call: %v replayed %v, want it run again", r.err, r.replayed())
	}
	wantRuns(t, b, 3)
}

// A response that does not marshal reaches the client as the Internal
// status gRPC's protobuf codec gives it, as from a server without the
// interceptor. The handler's work is done: that status is recorded, and
// the retry gets it again, with the metadata set along with it, without
// the handler running again.
func TestUnmarshallableResponse(t *testing.T) {
	plain := invoke(context.Background(), serveDial(t, &payments{badReply: true})(), chargeMethod, amount(1))
	want := status.Convert(plain.err)
	if want.Code() != codes.Internal {
		t.Fatalf("without the interceptor: %v, want Internal", plain.err)
	}
	b := setup(t, idemgrpc.Config{ReplayMetadata: []string{"x-charge-id"}})
	b.svc.badReply = true
	b.svc.header = metadata.Pairs("x-charge-id", "h_1")
	first := b.call(chargeMethod, amount(1), key("bad")...)
	if !proto.Equal(status.Convert(first.err).Proto(), want.Proto()) || first.replayed() {
		t.Fatalf("first call: %v replayed %v, want %v", first.err, first.replayed(), want.Proto())
	}
	if e := <-b.events; e.Outcome != idemgrpc.OutcomeExecuted || e.Code != codes.Internal {
		t.Errorf("event %+v, want executed, Internal", e)
	}
	for range 2 {
		r := b.call(chargeMethod, amount(1), key("bad")...)
		if !r.replayed() || !proto.Equal(status.Convert(r.err).Proto(), want.Proto()) || r.header.Get("x-charge-id")[0] != "h_1" {
			t.Fatalf("retry: %v replayed %v header %v, want %v replayed", r.err, r.replayed(), r.header, want.Proto())
		}
		if e := <-b.events; e.Outcome != idemgrpc.OutcomeReplayed || e.Code != codes.Internal {
			t.Errorf("event %+v, want replayed, Internal", e)
		}
	}
	wantRuns(t, b, 1)
}

// A key sent as binary metadata is rejected, not ignored: ignoring it
// would run the call unprotected, and run it again on the retry.
func TestH3BinaryKeyMetadataRejected(t *testing.T) {
	b := setup(t, idemgrpc.Config{})
	for _, md := range [][]string{
		{idemgrpc.KeyMetadata + "-bin", "k-bin"},
		{idemgrpc.KeyMetadata + "-bin", "k-bin", idemgrpc.KeyMetadata, "k-bin"},
	} {
		wantError(t, b.call(chargeMethod, amount(1), md...), codes.InvalidArgument, idemgrpc.ReasonKeyInvalid)
	}
	wantRuns(t, b, 0)
}

// A client whose deadline passes gets DeadlineExceeded; the handler, whose
// context has no deadline, runs on, and its outcome is recorded for the
// retry.
func TestH21ClientDeadlineDoesNotCutTheHandler(t *testing.T) {
	b := setup(t, idemgrpc.Config{})
	b.svc.hold = make(chan struct{})
	b.svc.started = make(chan struct{}, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if r := invoke(ctx, b.conn, chargeMethod, amount(1), key("deadline")...); r.code() != codes.DeadlineExceeded {
		t.Fatalf("call past its deadline: %v", r.err)
	}
	<-b.svc.started
	close(b.svc.hold)
	if e := <-b.events; e.Outcome != idemgrpc.OutcomeExecuted {
		t.Fatalf("event %+v, want executed", e)
	}
	if b.svc.sawCancel.Load() {
		t.Error("the handler's context ended with the client's deadline")
	}
	if r := b.call(chargeMethod, amount(1), key("deadline")...); !r.replayed() || r.reply != "charge 1: 1" {
		t.Errorf("retry: %q %v replayed %v", r.reply, r.err, r.replayed())
	}
	wantRuns(t, b, 1)
}

// Streaming methods of every kind pass through untouched: with the same
// key, each call runs and nothing marks it replayed, and neither
// Config.RequireKey nor an invalid key fails them.
func TestStreamsPassThrough(t *testing.T) {
	b := setup(t, idemgrpc.Config{RequireKey: true})
	for _, tc := range []struct {
		method         string
		client, server bool
		reply          string // of the i-th call, with i for %d
	}{
		{watchMethod, false, true, "watch %d: x"},
		{collectMethod, true, false, "collect %d: xx"},
		{chatMethod, true, true, "chat %d: x"},
	} {
		b.svc.runs.Store(0)
		for i, md := range [][]string{key("stream"), key("stream"), nil, append(key("a"), key("b")...)} {
			ctx := metadata.AppendToOutgoingContext(context.Background(), md...)
			s, err := b.conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: tc.client, ServerStreams: tc.server}, tc.method)
			if err != nil {
				t.Fatal(err)
			}
			sends := 1
			if tc.client && !tc.server {
				sends = 2
			}
			for range sends {
				if err := s.SendMsg(wrapperspb.String("x")); err != nil {
					t.Fatal(err)
				}
			}
			_ = s.CloseSend()
			out := new(wrapperspb.StringValue)
			if err := s.RecvMsg(out); err != nil {
				t.Fatalf("%s call %d: %v", tc.method, i, err)
			}
			h, _ := s.Header()
			if want := fmt.Sprintf(tc.reply, i+1); out.GetValue() != want || h.Get(idemgrpc.ReplayedMetadata) != nil {
				t.Errorf("%s call %d: %q header %v, want %q unmarked", tc.method, i, out.GetValue(), h, want)
			}
			if err := s.RecvMsg(out); err != io.EOF {
				t.Errorf("%s call %d: end of stream: %v", tc.method, i, err)
			}
		}
		wantRuns(t, b, 4)
	}
	if len(b.events) != 0 {
		t.Errorf("%d events for streaming calls", len(b.events))
	}
}

// TestInProgressPushbackPacesGRPCRetries: a client whose retry policy
// retries ABORTED after 10 ms waits the pushback the interceptor sends
// instead (the lease, 1 s here), and so gets the original call's replay
// rather than spending its attempts while the original runs.
func TestInProgressPushbackPacesGRPCRetries(t *testing.T) {
	b := setup(t, idemgrpc.Config{Lease: time.Second})
	conn := b.dial(grpc.WithDefaultServiceConfig(`{"methodConfig": [{
		"name": [{"service": "idemgrpc.test.Payments"}],
		"retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.01s", "maxBackoff": "0.01s",
			"backoffMultiplier": 1, "retryableStatusCodes": ["ABORTED"]}}]}`))
	b.svc.hold = make(chan struct{})
	b.svc.started = make(chan struct{}, 1)
	done := make(chan result)
	go func() { done <- b.call(chargeMethod, amount(7), key("kp")...) }()
	<-b.svc.started
	retried := make(chan result)
	go func() { retried <- invoke(context.Background(), conn, chargeMethod, amount(7), key("kp")...) }()
	// The retrying client's first attempt is answered in progress. Its
	// policy would try twice more within 20 ms; the original runs on for
	// 300 ms, and ends well before the pushback does.
	inProgress := 0
	release := time.After(300 * time.Millisecond)
wait:
	for {
		select {
		case e := <-b.events:
			if e.Outcome == idemgrpc.OutcomeInProgress {
				inProgress++
			}
		case <-release:
			break wait
		}
	}
	if inProgress != 1 {
		t.Errorf("%d attempts answered in progress while the original ran, want 1: the client did not wait the pushback", inProgress)
	}
	close(b.svc.hold)
	first := <-done
	wantOK(t, first)
	r := <-retried
	if r.err != nil || !r.replayed() || r.reply != first.reply {
		t.Errorf("retrying client: %q replayed=%v %v; want the original's reply replayed", r.reply, r.replayed(), r.err)
	}
	wantRuns(t, b, 1)
}

// leaveWhileRunning makes a call with key k whose handler sets the header
// and trailer x-charge-id, cancels it while the handler runs, and lets the
// handler go on once the server has seen the cancellation.
func leaveWhileRunning(t *testing.T, b *bundle, k string) {
	t.Helper()
	b.svc.hold = make(chan struct{})
	b.svc.started = make(chan struct{}, 1)
	b.svc.header = metadata.Pairs("x-charge-id", "ch_1")
	b.svc.trailer = metadata.Pairs("x-charge-id", "t_1")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan result)
	go func() { done <- invoke(ctx, b.conn, chargeMethod, amount(1), key(k)...) }()
	<-b.svc.started
	cancel()
	if r := <-done; r.code() != codes.Canceled {
		t.Fatalf("cancelled call: %v", r.err)
	}
	<-(<-b.calls).Done() // the server sees the cancellation
	close(b.svc.hold)
}
