package idemgrpc_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/idemgo/idem/contrib/idemgrpc"
)

// Metadata over a client's header list limit (grpc.WithMaxHeaderListSize)
// fails its call with Internal once the handler has run, and the outcome
// is recorded all the same, as after any failure of the transport: the
// retry gets the recorded answer without the metadata not named in
// Config.ReplayMetadata, and fails the same way when the named metadata is
// what is over the limit, while a client with a larger limit gets the
// replay. The replay marker can push headers that just fit on the first
// call over the limit, failing that client's replays (a known limitation,
// documented).
func TestMetadataOverClientHeaderListSize(t *testing.T) {
	const limit = 1024
	for _, tc := range []struct {
		name         string
		named        bool
		trailer      bool
		size         int
		first, retry codes.Code
	}{
		{"header not named", false, false, 2 * limit, codes.Internal, codes.OK},
		{"trailer not named", false, true, 2 * limit, codes.Internal, codes.OK},
		{"header named", true, false, 2 * limit, codes.Internal, codes.Internal},
		{"trailer named", true, true, 2 * limit, codes.Internal, codes.Internal},
		// :status, content-type and x-big take 42+60+(37+870) = 1009 bytes
		// of the limit; idempotent-replayed 55 more.
		{"header named, under the limit but for the replay marker", true, false, 870, codes.OK, codes.Internal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := idemgrpc.Config{}
			if tc.named {
				cfg.ReplayMetadata = []string{"x-big"}
			}
			b := setup(t, cfg)
			md := metadata.Pairs("x-big", strings.Repeat("v", tc.size))
			if tc.trailer {
				b.svc.trailer = md
			} else {
				b.svc.header = md
			}
			small := b.dial(grpc.WithMaxHeaderListSize(limit))
			if r := invoke(context.Background(), small, chargeMethod, amount(1), key("big")...); r.code() != tc.first {
				t.Fatalf("first call: %v, want %v", r.err, tc.first)
			}
			if e := <-b.events; e.Outcome != idemgrpc.OutcomeExecuted {
				t.Fatalf("first call's event %+v, want the outcome recorded", e)
			}
			for range 2 {
				if r := invoke(context.Background(), small, chargeMethod, amount(1), key("big")...); r.code() != tc.retry {
					t.Fatalf("retry: %v, want %v", r.err, tc.retry)
				}
				if e := <-b.events; e.Outcome != idemgrpc.OutcomeReplayed {
					t.Fatalf("retry's event %+v, want a replay", e)
				}
			}
			r := b.call(chargeMethod, amount(1), key("big")...)
			wantOK(t, r)
			if !r.replayed() || r.reply != "charge 1: 1" {
				t.Errorf("client without the limit: %q replayed %v, want the recorded answer", r.reply, r.replayed())
			}
			if got := r.header.Get("x-big"); tc.named && !tc.trailer && (len(got) != 1 || len(got[0]) != tc.size) {
				t.Errorf("replayed x-big of %d values, want the recorded one", len(got))
			}
			wantRuns(t, b, 1)
		})
	}
}
