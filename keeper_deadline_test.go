package idem_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgo/idem"
)

// countedUnreachable is a store whose heartbeats fail as an unreachable
// store's do, counting them.
type countedUnreachable struct {
	idem.Store
	beats *atomic.Int32
}

func (s countedUnreachable) Heartbeat(context.Context, idem.Key, idem.Lease, time.Duration) (idem.Lease, error) {
	s.beats.Add(1)
	return idem.Lease{}, idem.Unavailable(errors.New("connection refused"))
}

// TestOwnerLapseCountsFromTheLeasesEnd: the lapse of a lease whose
// heartbeats fail counts from the lease's ExpiresAt, as Begin granted it,
// not from when Run started: a Run that starts after its lease ran out is
// told at its first failed heartbeat that the lease has lapsed (work's
// context cancelled with cause ErrLeaseLost), not a whole TTL later.
func TestOwnerLapseCountsFromTheLeasesEnd(t *testing.T) {
	mem := newMem(t, nil)
	var beats atomic.Int32
	s := countedUnreachable{mem, &beats}
	k := testKey(t, "lapse-from-begin")
	b, err := s.Begin(context.Background(), k, mustRequest(t, `"req"`), &idem.BeginOpts{Lease: 300 * time.Millisecond})
	if err != nil || b.Kind != idem.Fresh {
		t.Fatalf("Begin = %+v, %v", b, err)
	}
	for time.Now().Before(b.Lease.ExpiresAt) { // the caller is slow to start the run
		time.Sleep(10 * time.Millisecond)
	}
	o := idem.Owner{Store: s, Key: k, Lease: b.Lease}
	var cause error
	var after int32
	o.Run(context.Background(), func(ctx context.Context) ([]byte, bool) {
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
			t.Error("work's context was not cancelled although the lease lapsed and heartbeats fail")
		}
		cause, after = context.Cause(ctx), beats.Load()
		return nil, false
	})
	if !errors.Is(cause, idem.ErrLeaseLost) {
		t.Fatalf("cause = %v, want ErrLeaseLost", cause)
	}
	if after != 1 {
		t.Errorf("the loss was reported after %d failed heartbeats, want 1: the lease had lapsed before Run started", after)
	}
}
