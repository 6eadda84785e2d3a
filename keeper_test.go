package idem_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/store/memstore"
)

// heartbeatWatch wraps a store and fails t when a heartbeat arrives for a
// key whose run has ended.
type heartbeatWatch struct {
	idem.Store
	t      *testing.T
	mu     sync.Mutex
	active map[string]bool
	beats  int
	of     map[string]int // beats by key
	// extend, when set, is how far every heartbeat extends a lease,
	// whatever the keeper asks: beats as often as a short lease needs,
	// with a lease a loaded machine cannot outrun.
	extend time.Duration
}

func (w *heartbeatWatch) Heartbeat(ctx context.Context, key idem.Key, lease idem.Lease, extend time.Duration) (idem.Lease, error) {
	w.mu.Lock()
	if !w.active[key.Value()] {
		w.t.Errorf("heartbeat for %s after its run ended", key.Value())
	}
	w.beats++
	w.of[key.Value()]++
	if w.extend > 0 {
		extend = w.extend
	}
	w.mu.Unlock()
	return w.Store.Heartbeat(ctx, key, lease, extend)
}

// newHeartbeatWatch watches the heartbeats of a new memstore.
func newHeartbeatWatch(t *testing.T) *heartbeatWatch {
	t.Helper()
	s, err := memstore.New(memstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return &heartbeatWatch{Store: s, t: t, active: map[string]bool{}, of: map[string]int{}}
}

// beatsOf returns how many heartbeats key has had.
func (w *heartbeatWatch) beatsOf(key idem.Key) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.of[key.Value()]
}

func (w *heartbeatWatch) set(key idem.Key, on bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.active[key.Value()] = on
}

// TestKeepersAreReusedSafely runs many short owners at once with leases so
// short that some heartbeats fire while their work runs and some timers
// are stopped just as they fire: the keepers Run reuses must never beat
// for a run that has ended, and every run must still be recorded. (The
// store keeps each lease for a second, so that a loaded machine delaying
// a beat by milliseconds does not lose one.)
func TestKeepersAreReusedSafely(t *testing.T) {
	w := newHeartbeatWatch(t)
	w.extend = time.Second
	ns := idem.MustNamespace("keepers")
	req := mustRequest(t, `"req"`)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 150 {
				key, err := idem.ParseKey(ns, fmt.Sprintf("k-%d-%d", g, i))
				if err != nil {
					t.Error(err)
					return
				}
				o, err := w.Store.Begin(context.Background(), key, req, &idem.BeginOpts{Lease: time.Second})
				if err != nil || o.Kind != idem.Fresh {
					t.Errorf("Begin = %v, %v", o.Kind, err)
					return
				}
				w.set(key, true)
				// A 3 ms lease to the keeper: a heartbeat every millisecond.
				o.Lease.TTL = 3 * time.Millisecond
				own := idem.Owner{Store: w, Key: key, Lease: o.Lease}
				work := time.Duration(rand.IntN(2500)) * time.Microsecond
				own.Run(context.Background(), func(ctx context.Context) ([]byte, bool) {
					time.Sleep(work)
					return []byte(`1`), true
				})
				w.set(key, false)
				if !own.Recorded {
					t.Errorf("%s not recorded: %v", key.Value(), own.Err)
				}
			}
		})
	}
	wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.beats == 0 {
		t.Error("no heartbeat at all: the test did not exercise beats")
	}
}

// TestReusedKeeperKeepsTheNextRun runs owners one after another on one
// goroutine, so that the pool hands each the keeper of the one before,
// its timer still armed or, after an idle pause, fired with nothing to
// keep: quick runs, then runs that last longer than their lease. A long
// run must be kept alive by the timer it inherited (no other caller can
// take its key over), and no beat may reach a run that has ended.
func TestReusedKeeperKeepsTheNextRun(t *testing.T) {
	w := newHeartbeatWatch(t)
	// The store keeps each lease for 10 s, from Begin and from every beat,
	// whatever the keeper asks: a loaded machine (a CI runner, -race) that
	// delays a beat past the keeper's short lease does not lose the key.
	// A keeper that does not beat for its run still fails the test: the
	// run waits for its beats.
	w.extend = 10 * time.Second
	ns := idem.MustNamespace("reuse")
	req := mustRequest(t, `"req"`)
	const lease = 500 * time.Millisecond // the keeper's: a heartbeat every 167 ms
	for i := range 40 {
		key, err := idem.ParseKey(ns, fmt.Sprintf("k-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		o, err := w.Store.Begin(context.Background(), key, req, &idem.BeginOpts{Lease: w.extend})
		if err != nil || o.Kind != idem.Fresh {
			t.Fatalf("Begin = %v, %v", o.Kind, err)
		}
		w.set(key, true)
		o.Lease.TTL = lease
		own := idem.Owner{Store: w, Key: key, Lease: o.Lease}
		long := i%4 == 3
		own.Run(context.Background(), func(ctx context.Context) ([]byte, bool) {
			if !long {
				return []byte(`1`), true
			}
			// Wait for three heartbeats (a keeper whose timer was not
			// armed for this run gives none); then another caller must
			// find the run in progress.
			for deadline := time.Now().Add(10 * time.Second); w.beatsOf(key) < 3; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("run %d: %d heartbeats in 10 s, want 3", i, w.beatsOf(key))
				}
			}
			if b, err := w.Store.Begin(context.Background(), key, req, nil); err != nil || b.Kind != idem.InFlight {
				t.Errorf("run %d: another Begin got %v, %v; want InFlight (the lease was not kept)", i, b.Kind, err)
			}
			if ctx.Err() != nil {
				t.Errorf("run %d: context cancelled: %v", i, context.Cause(ctx))
			}
			return []byte(`1`), true
		})
		w.set(key, false)
		if !own.Recorded {
			t.Errorf("run %d not recorded: %v", i, own.Err)
		}
		if i%8 == 1 {
			// Idle long enough for the inherited timer to fire with no
			// run to keep: the next runs must arm it again.
			time.Sleep(lease)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.beats == 0 {
		t.Error("no heartbeat at all: the test did not exercise beats")
	}
}

// waitBeats waits, up to 10 s, for n more heartbeats of key: a keeper that
// stopped keeping it gives none.
func waitBeats(t *testing.T, w *heartbeatWatch, key idem.Key, n int) {
	t.Helper()
	want := w.beatsOf(key) + n
	for deadline := time.Now().Add(10 * time.Second); w.beatsOf(key) < want; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d heartbeats in 10 s, want %d: its keeper stopped", key.Value(), w.beatsOf(key)-want+n, n)
		}
	}
}

// lateBeat is a context whose first Err call, which the keeper's first
// beat makes before it reads the clock, returns only at until: a beat
// whose timer fired that late.
type lateBeat struct {
	context.Context
	until time.Time
	once  sync.Once
}

func (c *lateBeat) Err() error {
	c.once.Do(func() { time.Sleep(time.Until(c.until)) })
	return c.Context.Err()
}

// unreachable is a store whose heartbeats fail, counting them.
type unreachable struct {
	idem.Store
	beats atomic.Int32
}

func (s *unreachable) Heartbeat(context.Context, idem.Key, idem.Lease, time.Duration) (idem.Lease, error) {
	s.beats.Add(1)
	return idem.Lease{}, errors.New("store unreachable")
}

// A first beat that runs only after the lease has lapsed (its timer fired
// late: a loaded machine, a paused process) finds the lease lapsed when
// its heartbeat fails, and reports it lost then: the lapse is a TTL after
// the keeping began, not a TTL after the late beat, which would let the
// run go on for its lateness while another owner may have the key.
func TestKeeperLateFirstBeatFindsTheLeaseLapsed(t *testing.T) {
	const ttl, every = 200 * time.Millisecond, 50 * time.Millisecond
	s := &unreachable{Store: newMem(t, nil)}
	ctx := &lateBeat{Context: context.Background(), until: time.Now().Add(2 * ttl)}
	lost := make(chan int32, 1)
	stop := idem.KeepAlive(ctx, s, testKey(t, "late"), idem.Lease{Token: "t", TTL: ttl}, every, func() { lost <- s.beats.Load() })
	defer stop()
	select {
	case n := <-lost:
		if n != 1 {
			t.Errorf("lease reported lost after %d failed heartbeats; want 1: the first beat, %v after the keeping began, is past a %v lease", n, 2*ttl, ttl)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("lease never reported lost while the store is unreachable")
	}
}

// TestKeepAliveEndsWithItsContext: KeepAlive extends the lease until its
// context is done, and then sends no more heartbeats, without reporting
// the lease lost.
func TestKeepAliveEndsWithItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newHeartbeatWatch(t)
		k := testKey(t, "ctx-ends")
		o, err := w.Store.Begin(context.Background(), k, mustRequest(t, `"req"`), &idem.BeginOpts{Lease: 3 * time.Second})
		if err != nil || o.Kind != idem.Fresh {
			t.Fatal(o, err)
		}
		w.set(k, true)
		ctx, cancel := context.WithCancel(context.Background())
		lost := false
		stop := idem.KeepAlive(ctx, w, k, o.Lease, 0, func() { lost = true })
		defer stop()
		time.Sleep(2500 * time.Millisecond) // a heartbeat every second
		if n := w.beatsOf(k); n != 2 {
			t.Fatalf("%d heartbeats in 2.5 s, want 2", n)
		}
		cancel()
		time.Sleep(10 * time.Second)
		if n := w.beatsOf(k); n != 2 {
			t.Errorf("%d heartbeats after ctx was done, want none", n-2)
		}
		if lost {
			t.Error("the lease was reported lost when ctx was done")
		}
	})
}
