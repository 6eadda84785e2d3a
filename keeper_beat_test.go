package idem

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// heldBeats is a store whose heartbeats wait until released, counting how
// many are under way at once.
type heldBeats struct {
	Store
	release        chan struct{}
	inFlight, most atomic.Int32
}

func (s *heldBeats) Heartbeat(_ context.Context, _ Key, lease Lease, _ time.Duration) (Lease, error) {
	n := s.inFlight.Add(1)
	for m := s.most.Load(); n > m && !s.most.CompareAndSwap(m, n); m = s.most.Load() {
	}
	<-s.release
	s.inFlight.Add(-1)
	return lease, nil
}

// A pooled keeper's timer, armed by an earlier run with a longer interval,
// may fire just as the next run starts: its beat, not yet run, serves the
// new run, while start arms the timer again for the new run's shorter
// interval. When that timer fires while the late beat's heartbeat is under
// way, the keeper must not send a second heartbeat beside it: two beats at
// once leave stop waiting for only the first to end, so the second would
// outlive its run, read the keeper as the pool hands it to the next run,
// and could cancel that run with ErrLeaseLost.
func TestKeeperNeverBeatsTwiceAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &heldBeats{release: make(chan struct{})}
		key := Key{ns: "beats", value: "k"}
		k := new(keeper)
		// The earlier run: a beat every hour.
		if !k.start(context.Background(), s, key, Lease{Token: "a", TTL: 3 * time.Hour}, 0, nil, nil) {
			t.Fatal("the keeper does not keep the first lease")
		}
		k.mu.Lock()
		k.stopped = true // ended, as a pooled keeper's stop leaves it: its timer still armed
		k.mu.Unlock()
		// The timer fires; its beat has not taken the lock yet when the
		// next run, with a beat every second, starts.
		k.timer.Stop()
		if !k.start(context.Background(), s, key, Lease{Token: "b", TTL: 3 * time.Second}, 0, nil, nil) {
			t.Fatal("the keeper does not keep the second lease")
		}
		go k.beat() // the fired timer's beat, running late
		synctest.Wait()
		if n := s.inFlight.Load(); n != 1 {
			t.Fatalf("%d heartbeats under way after the late beat, want 1", n)
		}
		// The timer start armed fires while that heartbeat is under way.
		time.Sleep(1500 * time.Millisecond)
		synctest.Wait()
		if n := s.most.Load(); n != 1 {
			t.Errorf("%d heartbeats under way at once, want 1", n)
		}
		close(s.release)
		k.stop()
	})
}

// hangingBeats is a store whose heartbeats answer only when their context
// ends, as over a network partition; started receives one value per
// heartbeat.
type hangingBeats struct {
	Store
	started chan struct{}
}

func (s *hangingBeats) Heartbeat(ctx context.Context, _ Key, lease Lease, _ time.Duration) (Lease, error) {
	s.started <- struct{}{}
	<-ctx.Done()
	return Lease{}, ctx.Err()
}

// Stopping a keeper whose heartbeat hangs on the store cancels that
// heartbeat: the run has ended, so the settle call that follows must not
// wait for it (up to the lease's lapse, half a minute here).
func TestKeeperStopCancelsTheHeartbeatUnderWay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &hangingBeats{started: make(chan struct{}, 1)}
		k := new(keeper)
		if !k.start(context.Background(), s, Key{ns: "beats", value: "k"}, Lease{Token: "a", TTL: 30 * time.Second}, time.Second, nil, nil) {
			t.Fatal("the keeper does not keep the lease")
		}
		<-s.started
		start := time.Now()
		k.stop()
		if d := time.Since(start); d > 0 {
			t.Errorf("stop waited %s for the hanging heartbeat, want it cancelled at once", d)
		}
	})
}
