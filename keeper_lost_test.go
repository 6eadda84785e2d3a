package idem_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/idemgo/idem"
)

// leaseLostHeartbeats is a store whose Heartbeat says the lease is lost,
// in ErrLeaseLost's words rather than ErrStaleToken's (a store wrapped in
// a layer of its own, say).
type leaseLostHeartbeats struct{ idem.Store }

func (leaseLostHeartbeats) Heartbeat(context.Context, idem.Key, idem.Lease, time.Duration) (idem.Lease, error) {
	return idem.Lease{}, fmt.Errorf("wrapper: %w", idem.ErrLeaseLost)
}

// TestKeepAliveHeartbeatSaysLeaseLost: a Heartbeat that fails with an
// error wrapping ErrLeaseLost reports the loss at its first beat, as
// ErrStaleToken does, instead of being retried as an unreachable store
// until the lease's TTL has passed.
func TestKeepAliveHeartbeatSaysLeaseLost(t *testing.T) {
	s := newMem(t, nil)
	k := testKey(t, "heartbeat-lease-lost")
	o, err := s.Begin(context.Background(), k, mustRequest(t, `"req"`), &idem.BeginOpts{Lease: time.Hour})
	if err != nil || o.Kind != idem.Fresh {
		t.Fatalf("Begin = %+v, %v", o, err)
	}
	lost := make(chan struct{})
	stop := idem.KeepAlive(context.Background(), leaseLostHeartbeats{s}, k, o.Lease, time.Millisecond, func() { close(lost) })
	defer stop()
	select {
	case <-lost:
	case <-time.After(10 * time.Second):
		t.Fatal("a heartbeat failing with ErrLeaseLost did not report the loss")
	}
}
