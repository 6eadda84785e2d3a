package tracker

import (
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestConcurrentOwnershipIsExclusive: many goroutines take, retry,
// complete and release a few keys at once, while sweeps run back to back
// on a clock that stands still (so nothing expires). A key is never held
// by two owners at once, an owner's retry always passes and anybody
// else's fails, a completed key is never reserved again, a released key
// is reservable again, and no sweep deletes a live key.
func TestConcurrentOwnershipIsExclusive(t *testing.T) {
	t.Parallel()
	const keys, workers, releases = 8, 16, 100
	fixed := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	tr := New(Config{TTL: time.Hour, SweepInterval: time.Millisecond, Shards: 2, Now: func() time.Time { return fixed }})
	tr.Start()
	defer tr.Stop()

	var (
		holders   [keys]atomic.Int32 // owners of each key's live reservation
		completed [keys]atomic.Bool  // set once the key is completed; it stays so
		released  [keys]atomic.Int32 // releases of each key
		errs      = make(chan string, 64)
	)
	fail := func(format string, args ...any) {
		select {
		case errs <- fmt.Sprintf(format, args...):
		default:
		}
	}
	var wg sync.WaitGroup
	done := make(chan struct{})
	swept := make(chan struct{})
	go func() { // sweeps back to back, besides the sweeper's
		defer close(swept)
		for {
			select {
			case <-done:
				return
			default:
				tr.sweep()
			}
		}
	}()
	// The workers go on until every key is completed, which it is after
	// its 100th release: how many rounds that takes depends on how the
	// goroutines are scheduled (a worker that finds a key taken skips it),
	// so no number of rounds is enough on every machine.
	allCompleted := func() bool {
		for k := range keys {
			if !completed[k].Load() {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(time.Minute)
	for g := range workers {
		wg.Go(func() {
			for r := 0; !allCompleted(); r++ {
				if time.Now().After(deadline) {
					fail("not every key completed within a minute")
					return
				}
				k := (g + r) % keys
				key := strconv.Itoa(k)
				wasCompleted := completed[k].Load()
				tok, ok := tr.Acquire("s", key)
				if !ok {
					continue
				}
				if wasCompleted {
					fail("key %d: reserved again after it was completed", k)
				}
				if n := holders[k].Add(1); n != 1 {
					fail("key %d: %d owners at once", k, n)
				}
				if !tr.ReserveOwned("s", key, tok) {
					fail("key %d: the owner's retry was refused", k)
				}
				if tr.Reserve("s", key) || tr.ReserveOwned("s", key, Token{tracker: tr.id, n: 1}) {
					fail("key %d: reserved by another while owned", k)
				}
				if d, ok := tr.Reserved("s", key); !ok || d != time.Hour {
					fail("key %d: Reserved = %v, %v while owned on a still clock; want 1h, true", k, d, ok)
				}
				holders[k].Add(-1)
				if released[k].Load() >= releases {
					completed[k].Store(true) // before the key is completed: nobody may reserve it after this
					if !tr.CompleteOwned("s", key, tok) {
						fail("key %d: the owner's CompleteOwned failed", k)
					}
					continue
				}
				if !tr.ReleaseOwned("s", key, tok) {
					fail("key %d: the owner's ReleaseOwned failed", k)
				}
				released[k].Add(1)
			}
		})
	}
	wg.Wait()
	close(done)
	<-swept
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	for k := range keys {
		key := strconv.Itoa(k)
		if !completed[k].Load() || released[k].Load() < releases {
			t.Errorf("key %d: released %d times, completed %v; want %d releases, then completed", k, released[k].Load(), completed[k].Load(), releases)
		}
		switch {
		case completed[k].Load():
			if !tr.Completed("s", key) || tr.Reserve("s", key) {
				t.Errorf("key %d: completed, but not kept", k)
			}
		case released[k].Load() > 0:
			if tr.Seen("s", key) || !tr.Reserve("s", key) {
				t.Errorf("key %d: released, but not free", k)
			}
		}
	}
}
