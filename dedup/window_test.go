package dedup

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
)

// testKey returns a distinct Key for each i, with structure (a counter in
// the last bytes) rather than randomness, so the hash mix is exercised too.
func testKey(i uint64) Key {
	var k Key
	binary.BigEndian.PutUint64(k[8:], i)
	return k
}

// TestWindowFirstTrueThenFalse pins D2: true the first time, false after.
func TestWindowFirstTrueThenFalse(t *testing.T) {
	t.Parallel()
	w := NewWindow(8)
	k := Derive([16]byte{1}, 1, []byte("put"))
	if !w.CheckAndRecord(k) {
		t.Fatal("first CheckAndRecord = false, want true")
	}
	for i := range 3 {
		if w.CheckAndRecord(k) {
			t.Fatalf("repeat %d: CheckAndRecord = true, want false", i+1)
		}
	}
}

// TestWindowEvictsOldestBeyondCapacity pins D2: after more than capacity
// distinct keys the oldest look new again, and the last capacity keys are
// all remembered.
func TestWindowEvictsOldestBeyondCapacity(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ capacity, extra int }{
		{capacity: 1, extra: 1},
		{capacity: 3, extra: 2},
		{capacity: 100, extra: 1},
		{capacity: 1000, extra: 999},
		{capacity: 4096, extra: 5000},
	} {
		t.Run(fmt.Sprintf("cap=%d/extra=%d", tc.capacity, tc.extra), func(t *testing.T) {
			t.Parallel()
			w := NewWindow(tc.capacity)
			total := tc.capacity + tc.extra
			for i := range total {
				if !w.CheckAndRecord(testKey(uint64(i))) {
					t.Fatalf("key %d: first CheckAndRecord = false", i)
				}
			}
			// Check the last capacity keys first: a hit evicts nothing.
			for i := total - tc.capacity; i < total; i++ {
				if w.CheckAndRecord(testKey(uint64(i))) {
					t.Errorf("key %d of the last %d: CheckAndRecord = true, want remembered", i, tc.capacity)
				}
			}
			oldest := min(tc.extra, tc.capacity)
			for i := range oldest {
				if !w.CheckAndRecord(testKey(uint64(i))) {
					t.Errorf("evicted key %d: CheckAndRecord = false, want it to look new", i)
				}
			}
		})
	}
}

// TestWindowHitRefreshesRecency pins the LRU half of D2: seeing a key again
// makes it the most recent, so the next eviction takes another. It is where
// Window departs from the Rust design's check_and_record, which tests with
// contains and so would evict a here, the key first seen.
func TestWindowHitRefreshesRecency(t *testing.T) {
	t.Parallel()
	a, b, c, d := testKey(1), testKey(2), testKey(3), testKey(4)
	w := NewWindow(3)
	for _, k := range []Key{a, b, c} {
		w.CheckAndRecord(k)
	}
	w.CheckAndRecord(a) // a is now the most recent; b the oldest
	w.CheckAndRecord(d) // evicts b
	for _, tc := range []struct {
		name string
		k    Key
		want bool
	}{
		{"a refreshed", a, false},
		{"c kept", c, false},
		{"d recorded", d, false},
		{"b evicted", b, true},
	} {
		if got := w.CheckAndRecord(tc.k); got != tc.want {
			t.Errorf("%s: CheckAndRecord = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestWindowLenStartsAtZeroAndNeverExceedsCap pins D3's Len half.
func TestWindowLenStartsAtZeroAndNeverExceedsCap(t *testing.T) {
	t.Parallel()
	const capacity = 50
	w := NewWindow(capacity)
	if w.Len() != 0 {
		t.Fatalf("Len of a new window = %d, want 0", w.Len())
	}
	if w.Cap() != capacity {
		t.Fatalf("Cap = %d, want %d", w.Cap(), capacity)
	}
	for i := range 3 * capacity {
		w.CheckAndRecord(testKey(uint64(i)))
		if want := min(i+1, capacity); w.Len() != want {
			t.Fatalf("after %d distinct keys Len = %d, want %d", i+1, w.Len(), want)
		}
	}
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestWindowMemoryBound pins D3's memory half: a full 1,000,000-key window
// (100,000 under the race detector) takes at most the documented 40 bytes
// per key, measured, not computed; recording as many again into it takes no
// more.
func TestWindowMemoryBound(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a million-key window")
	}
	n := uint64(1_000_000)
	if raceEnabled {
		n = 100_000 // the race detector makes a million-key fill take 20 s
	}
	before := heapInUse()
	w := NewWindow(int(n))
	for i := range n {
		w.CheckAndRecord(testKey(i))
	}
	full := heapInUse()
	for i := range n {
		w.CheckAndRecord(testKey(n + i))
	}
	after := heapInUse()
	runtime.KeepAlive(w)
	if uint64(w.Len()) != n {
		t.Fatalf("Len = %d, want %d", w.Len(), n)
	}

	perKey := float64(full-before) / float64(n)
	t.Logf("%.1f bytes per key at %d keys", perKey, n)
	if perKey > 40 {
		t.Errorf("window takes %.1f bytes per key, documented bound is 40", perKey)
	}
	// Any per-key allocation would grow the heap by at least n bytes; the
	// slack is for what the runtime and other tests allocate meanwhile.
	if grew := int64(after) - int64(full); grew > int64(n/4) {
		t.Errorf("recording %d more keys into a full window grew the heap by %d bytes", n, grew)
	}
}

// TestWindowConcurrentFirstSightingOnce: goroutines racing to record the
// same keys into a window big enough for all of them see each key as new
// exactly once between them.
func TestWindowConcurrentFirstSightingOnce(t *testing.T) {
	t.Parallel()
	const keys, workers = 2000, 16
	w := NewWindow(keys)
	var firsts [keys]atomic.Int32
	var wg sync.WaitGroup
	for g := range workers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 7))
			for _, i := range r.Perm(keys) {
				if w.CheckAndRecord(testKey(uint64(i))) {
					firsts[i].Add(1)
				}
			}
		})
	}
	wg.Wait()
	for i := range firsts {
		if n := firsts[i].Load(); n != 1 {
			t.Errorf("key %d was new to %d goroutines, want 1", i, n)
		}
	}
	if w.Len() != keys {
		t.Errorf("Len = %d, want %d", w.Len(), keys)
	}
}

func TestNewWindowRejectsBadCapacity(t *testing.T) {
	t.Parallel()
	for _, capacity := range []int{0, -1, maxCapacity + 1} {
		func() {
			defer func() {
				if ce, ok := recover().(*CapacityError); !ok || ce.Capacity != capacity {
					t.Errorf("NewWindow(%d) did not panic with a *CapacityError", capacity)
				}
			}()
			NewWindow(capacity)
		}()
	}
}

// TestZeroWindowRemembersDefaultCapacity: a Window declared without
// NewWindow is ready to use and remembers DefaultCapacity keys, as its
// documentation says, even when its first calls come from many goroutines
// at once.
func TestZeroWindowRemembersDefaultCapacity(t *testing.T) {
	t.Parallel()
	var w Window
	if w.Len() != 0 || w.Cap() != DefaultCapacity {
		t.Fatalf("zero Window: Len = %d, Cap = %d; want 0, %d", w.Len(), w.Cap(), DefaultCapacity)
	}
	const workers = 8
	var firsts atomic.Int32
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			if w.CheckAndRecord(testKey(0)) {
				firsts.Add(1)
			}
			_, _ = w.Len(), w.Cap()
		})
	}
	wg.Wait()
	if n := firsts.Load(); n != 1 {
		t.Fatalf("key 0 was new to %d goroutines, want 1", n)
	}
	for i := 1; i < DefaultCapacity; i++ {
		w.CheckAndRecord(testKey(uint64(i)))
	}
	if w.Len() != DefaultCapacity {
		t.Fatalf("Len = %d after %d distinct keys, want %d", w.Len(), DefaultCapacity, DefaultCapacity)
	}
	if w.CheckAndRecord(testKey(0)) {
		t.Fatalf("key 0 forgotten after %d keys; the window holds %d", DefaultCapacity-1, DefaultCapacity)
	}
	w.CheckAndRecord(testKey(DefaultCapacity)) // evicts key 1, now the oldest
	if !w.CheckAndRecord(testKey(1)) {
		t.Errorf("key 1 still remembered after %d newer keys", DefaultCapacity)
	}
}

// TestNewWindowCheckedRejectsBadCapacity: a capacity out of range is a
// *CapacityError naming it, never a panic; NewWindow panics with the same
// error.
func TestNewWindowCheckedRejectsBadCapacity(t *testing.T) {
	t.Parallel()
	for _, capacity := range []int{0, -1, math.MinInt, maxCapacity + 1, math.MaxInt} {
		w, err := NewWindowChecked(capacity)
		var ce *CapacityError
		if w != nil || !errors.As(err, &ce) || ce.Capacity != capacity {
			t.Errorf("NewWindowChecked(%d) = %v, %v; want nil and a *CapacityError for %d", capacity, w, err, capacity)
			continue
		}
		if want := fmt.Sprintf("dedup: window capacity must be between 1 and %d, got %d", maxCapacity, capacity); err.Error() != want {
			t.Errorf("error text %q, want %q", err, want)
		}
	}
	for _, capacity := range []int{1, 2, 1000} {
		w, err := NewWindowChecked(capacity)
		if err != nil || w.Cap() != capacity || w.Len() != 0 {
			t.Errorf("NewWindowChecked(%d) = %v; want an empty window of that capacity", capacity, err)
		}
	}
}

// TestNewWindowCheckedRejectsWhatThisPlatformCannotAllocate: on a 32-bit
// platform a capacity near 1<<28 would need a node slab larger than the
// address space, which make refuses with a runtime panic; NewWindowChecked
// and NewFilterChecked must answer a *CapacityError instead, as they
// promise never to panic. Run it with GOARCH=386; on 64-bit platforms every
// capacity up to 1<<28 - 1 can be allocated, and testing that would take
// gigabytes.
func TestNewWindowCheckedRejectsWhatThisPlatformCannotAllocate(t *testing.T) {
	if strconv.IntSize == 64 {
		t.Skip("every capacity up to 1<<28 - 1 is addressable on a 64-bit platform")
	}
	for _, capacity := range []int{1<<28 - 1, 178_956_971} {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("NewWindowChecked(%d) panicked: %v", capacity, r)
				}
			}()
			var ce *CapacityError
			if _, err := NewWindowChecked(capacity); !errors.As(err, &ce) {
				t.Errorf("NewWindowChecked(%d) error = %v, want a *CapacityError", capacity, err)
			}
			if _, err := NewFilterChecked(capacity); !errors.As(err, &ce) {
				t.Errorf("NewFilterChecked(%d) error = %v, want a *CapacityError", capacity, err)
			}
		}()
	}
}
