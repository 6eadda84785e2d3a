package redisstore_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
	"github.com/idemgo/idem/internal/redistest"
)

// TestInFlightRetryAfterForGood: a lease of math.MaxInt64 ("for good")
// leaves about 292 years to run, one millisecond more once rounded up to
// the millisecond; the RetryAfter of a Begin that finds it in flight is
// that rest, capped at the longest time.Duration, never a negative one
// wrapped around from it.
func TestInFlightRetryAfterForGood(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := idemtest.NewClock()
	s := newStore(t, sharedClient(t), redistest.Prefix(t), clock.Now)
	key := mustKey(t, idemtest.RandomNamespace(t), "for-good")
	req := mustRequest(t, `{}`)
	o, err := s.Begin(ctx, key, req, &idem.BeginOpts{Lease: math.MaxInt64})
	if err != nil || o.Kind != idem.Fresh {
		t.Fatalf("Begin = %v, %v; want fresh", o.Kind, err)
	}
	for _, step := range []time.Duration{0, time.Millisecond, time.Hour} {
		clock.Advance(step)
		o, err := s.Begin(ctx, key, req, nil)
		if err != nil || o.Kind != idem.InFlight {
			t.Fatalf("Begin %v later = %v, %v; want in_flight", step, o.Kind, err)
		}
		if want := 290 * 365 * 24 * time.Hour; o.RetryAfter < want {
			t.Errorf("Begin %v later: RetryAfter = %v, want the rest of the lease, over %v", step, o.RetryAfter, want)
		}
	}
}
