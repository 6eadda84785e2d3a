package idem_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
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
}

func (w *heartbeatWatch) Heartbeat(ctx context.Context, key idem.Key, lease idem.Lease, extend time.Duration) (idem.Lease, error) {
	w.mu.Lock()
	if !w.active[key.Value()] {
		w.t.Errorf("heartbeat for %s after its run ended", key.Value())
	}
	w.beats++
	w.mu.Unlock()
	return w.Store.Heartbeat(ctx, key, lease, extend)
}

func (w *heartbeatWatch) set(key idem.Key, on bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.active[key.Value()] = on
}

// TestKeepersAreReusedSafely runs many short owners at once with leases so
// short that some heartbeats fire while their work runs and some timers
// are stopped just as they fire: the keepers Run reuses must never beat
// for a run that has ended, and every run must still be recorded.
func TestKeepersAreReusedSafely(t *testing.T) {
	s, err := memstore.New(memstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	w := &heartbeatWatch{Store: s, t: t, active: map[string]bool{}}
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
				// A 3 ms lease: a heartbeat every millisecond.
				o, err := s.Begin(context.Background(), key, req, &idem.BeginOpts{Lease: 3 * time.Millisecond})
				if err != nil || o.Kind != idem.Fresh {
					t.Errorf("Begin = %v, %v", o.Kind, err)
					return
				}
				w.set(key, true)
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
