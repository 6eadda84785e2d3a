package idem_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgo/idem"
)

// countedHeartbeats counts the heartbeats its store is sent.
type countedHeartbeats struct {
	idem.Store
	beats atomic.Int32
}

func (s *countedHeartbeats) Heartbeat(ctx context.Context, key idem.Key, lease idem.Lease, extend time.Duration) (idem.Lease, error) {
	s.beats.Add(1)
	return s.Store.Heartbeat(ctx, key, lease, extend)
}

// TestKeepAliveWithoutKeyOrTokenReportsTheLoss: KeepAlive given the zero
// Key or a lease without a token (a Lease not taken from a Fresh outcome)
// cannot keep any lease, as with a nil Store: it reports the loss before
// it returns and sends no heartbeat, instead of heartbeats that fail
// (every interval, for ever, when the lease has no TTL to lapse by)
// without the caller ever being told.
func TestKeepAliveWithoutKeyOrTokenReportsTheLoss(t *testing.T) {
	ctx := context.Background()
	s := &countedHeartbeats{Store: newMem(t, nil)}
	k := testKey(t, "keepalive-args")
	o, err := s.Begin(ctx, k, mustRequest(t, `"req"`), nil)
	if err != nil || o.Kind != idem.Fresh {
		t.Fatalf("Begin = %+v, %v", o, err)
	}
	noTTL := o.Lease
	noTTL.TTL = 0
	for name, c := range map[string]struct {
		key   idem.Key
		lease idem.Lease
	}{
		"the zero Key":                      {idem.Key{}, o.Lease},
		"the zero Key, a lease without TTL": {idem.Key{}, noTTL},
		"a lease without a token":           {k, idem.Lease{TTL: time.Hour}},
		"the zero Lease":                    {k, idem.Lease{}},
	} {
		var lost atomic.Int32
		stop := idem.KeepAlive(ctx, s, c.key, c.lease, time.Millisecond, func() { lost.Add(1) })
		if n := lost.Load(); n != 1 {
			t.Errorf("KeepAlive with %s: the loss reported %d times by its return, want 1", name, n)
		}
		time.Sleep(10 * time.Millisecond) // heartbeats would have fired
		stop()
		if n := lost.Load(); n != 1 {
			t.Errorf("KeepAlive with %s: the loss reported %d times, want 1", name, n)
		}
	}
	if n := s.beats.Load(); n != 0 {
		t.Errorf("%d heartbeats sent for leases that cannot be kept, want none", n)
	}
	if rec, err := s.Get(ctx, k); err != nil || rec.Status != idem.StatusInProgress || !rec.LeaseExpiresAt.Equal(o.Lease.ExpiresAt) {
		t.Errorf("the reservation after KeepAlives that cannot keep it: %+v, %v; want it untouched", rec, err)
	}
}
