package tracker

import (
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// The tests in this file run in a synctest bubble: time.Now and the
// sweeper's ticker follow a fake clock that advances only when every
// goroutine of the bubble is blocked, so time.Sleep jumps ahead at once.

const ttl = time.Hour

// TestCompletedKeyExpiresAfterTTL pins T2: a completed key is kept until
// the TTL has passed since Complete, and not a moment longer.
func TestCompletedKeyExpiresAfterTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := New(Config{TTL: ttl})
		tr.Start()
		defer tr.Stop()

		tr.Reserve("s", "k")
		time.Sleep(10 * time.Minute)
		tr.Complete("s", "k") // the TTL runs from here

		time.Sleep(ttl - time.Nanosecond)
		if !tr.Seen("s", "k") || tr.Reserve("s", "k") {
			t.Fatal("completed key gone before its TTL")
		}
		time.Sleep(time.Nanosecond)
		if tr.Seen("s", "k") {
			t.Fatal("completed key still Seen at its TTL")
		}
		if !tr.Reserve("s", "k") {
			t.Fatal("Reserve of an expired key = false")
		}
	})
}

// TestCompleteRefreshesTTL pins T2's refresh: completing again restarts the
// TTL.
func TestCompleteRefreshesTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := New(Config{TTL: ttl})
		tr.Start()
		defer tr.Stop()

		tr.Complete("s", "k")
		time.Sleep(ttl * 3 / 4)
		tr.Complete("s", "k")
		time.Sleep(ttl * 3 / 4) // 1.5 TTL after the first Complete
		if !tr.Seen("s", "k") {
			t.Fatal("key expired counting from the first Complete")
		}
		time.Sleep(ttl / 4)
		if tr.Seen("s", "k") {
			t.Fatal("key still Seen a TTL after the last Complete")
		}
	})
}

// TestAbandonedReservationExpiresAndIsSwept pins T4: a reservation never
// completed or released frees its key after the TTL, and the sweeper then
// deletes it.
func TestAbandonedReservationExpiresAndIsSwept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Sweeps at 7, 14, …, 56, 63 minutes: none at the TTL itself.
		const every = 7 * time.Minute
		tr := New(Config{TTL: ttl, SweepInterval: every})
		tr.Start()
		defer tr.Stop()

		tr.Reserve("s", "crashed")
		tr.Reserve("s", "swept")
		time.Sleep(ttl - time.Second)
		if tr.Reserve("s", "crashed") {
			t.Fatal("reservation taken over before its TTL")
		}
		time.Sleep(time.Second)
		if tr.Seen("s", "crashed") {
			t.Fatal("abandoned reservation still Seen at its TTL")
		}
		if !tr.Reserve("s", "crashed") {
			t.Fatal("abandoned reservation not freed at its TTL")
		}

		if tr.Len() != 2 {
			t.Fatalf("Len = %d before the sweep, want 2", tr.Len())
		}
		time.Sleep(every) // one sweep
		synctest.Wait()
		if tr.Len() != 1 {
			t.Fatalf("Len = %d after the sweep, want 1 (the new reservation)", tr.Len())
		}
		if !tr.Seen("s", "crashed") {
			t.Fatal("the sweeper deleted a live reservation")
		}
	})
}

// TestRetryRefreshesReservation: an owner retrying with its token keeps the
// reservation alive past the TTL of the first attempt.
func TestRetryRefreshesReservation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := New(Config{TTL: ttl})
		tr.Start()
		defer tr.Stop()

		tok, _ := tr.Acquire("s", "k")
		for attempt := range 3 {
			time.Sleep(ttl * 3 / 4)
			if !tr.ReserveOwned("s", "k", tok) {
				t.Fatalf("retry %d: ReserveOwned = false", attempt+1)
			}
			if tr.Reserve("s", "k") {
				t.Fatalf("retry %d: a duplicate took the key from its retrying owner", attempt+1)
			}
		}
	})
}

// TestStaleOwnerCannotTouchSuccessor: once an abandoned reservation has been
// taken over, the old owner's token opens nothing.
func TestStaleOwnerCannotTouchSuccessor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := New(Config{TTL: ttl})
		tr.Start()
		defer tr.Stop()

		stale, _ := tr.Acquire("s", "k")
		time.Sleep(ttl)
		fresh, ok := tr.Acquire("s", "k")
		if !ok {
			t.Fatal("takeover of an abandoned reservation failed")
		}
		if tr.ReserveOwned("s", "k", stale) {
			t.Error("stale owner's retry passed")
		}
		if tr.ReleaseOwned("s", "k", stale) {
			t.Error("stale owner released its successor's reservation")
		}
		if tr.CompleteOwned("s", "k", stale) {
			t.Error("stale owner completed its successor's reservation")
		}
		if !tr.CompleteOwned("s", "k", fresh) {
			t.Error("successor's CompleteOwned = false")
		}
	})
}

// TestOwnerRetakesLapsedKey: an owner whose reservation lapsed, with nobody
// taking the key meanwhile, gets it back with its retry.
func TestOwnerRetakesLapsedKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := New(Config{TTL: ttl, SweepInterval: time.Minute})
		tr.Start()
		defer tr.Stop()

		tok, _ := tr.Acquire("s", "k")
		time.Sleep(2 * ttl) // lapsed and swept
		synctest.Wait()
		if tr.Len() != 0 {
			t.Fatalf("Len = %d, want the lapsed reservation swept", tr.Len())
		}
		if !tr.ReserveOwned("s", "k", tok) {
			t.Fatal("owner could not retake its free key")
		}
		if tr.Reserve("s", "k") {
			t.Fatal("retaken key is not reserved")
		}
		if !tr.ReleaseOwned("s", "k", tok) {
			t.Fatal("the retaken reservation is not the owner's")
		}
	})
}

// TestSweepReturnsBurstMemory checks the package doc's promise that the
// sweeper reclaims the memory of expired keys: once a burst of keys has
// expired and been swept, the heap is back near where it was before the
// burst (a Go map never shrinks, so the sweep must replace it), and the
// keys still live, a completed one and a reservation with its owner, are
// kept.
func TestSweepReturnsBurstMemory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const burst = 50_000
		keys := make([]string, burst) // made beforehand: only the map counts
		for i := range keys {
			keys[i] = strconv.Itoa(i)
		}
		tr := New(Config{TTL: ttl, SweepInterval: time.Minute, Shards: 4})
		tr.Start()
		defer tr.Stop()

		base := heapAlloc()
		for _, k := range keys {
			tr.Complete("burst", k)
		}
		peak := heapAlloc()
		time.Sleep(ttl / 2)
		tr.Complete("s", "done")
		tok, _ := tr.Acquire("s", "reserved")
		time.Sleep(ttl / 2) // the burst expires; the next sweep deletes it
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := tr.Len(); n != 2 {
			t.Fatalf("Len = %d after the burst expired, want 2", n)
		}
		after := heapAlloc()
		t.Logf("heap above the start: %d KiB at the peak, %d KiB after the sweep", (peak-base)>>10, (after-base)>>10)
		if after > base+(peak-base)/8 {
			t.Errorf("the swept tracker still holds %d KiB of the %d KiB its burst took", (after-base)>>10, (peak-base)>>10)
		}
		if !tr.Completed("s", "done") || tr.Reserve("s", "reserved") {
			t.Error("a live key was lost with the burst")
		}
		if !tr.ReleaseOwned("s", "reserved", tok) {
			t.Error("the reservation lost its owner with the burst")
		}
		runtime.KeepAlive(keys)
	})
}

// TestSweepReturnsBurstMemoryOverManyShards: the memory of an expired
// burst is given back however many shards it was spread over. With many
// shards each holds few of the burst's keys, yet together those small maps
// are most of the burst's memory: a sweep that rebuilt only the maps that
// once held hundreds of keys kept all of it for good.
func TestSweepReturnsBurstMemoryOverManyShards(t *testing.T) {
	const shards, perShard = 1024, 100
	keys := make([]string, shards*perShard) // made beforehand: only the maps count
	for i := range keys {
		keys[i] = strconv.Itoa(i)
	}
	var now atomic.Int64
	tr := started(t, Config{TTL: ttl, SweepInterval: 1000 * time.Hour, Shards: shards, Now: func() time.Time {
		return time.Unix(0, now.Load())
	}})

	base := heapAlloc()
	for _, k := range keys {
		tr.Complete("burst", k)
	}
	peak := heapAlloc()
	now.Add(int64(ttl)) // the burst expires
	tr.sweep()
	if n := tr.Len(); n != 0 {
		t.Fatalf("Len = %d after the burst expired and was swept, want 0", n)
	}
	after := heapAlloc()
	t.Logf("heap above the start: %d KiB at the peak, %d KiB after the sweep", (peak-base)>>10, (after-base)>>10)
	if after > base+(peak-base)/8 {
		t.Errorf("the swept tracker still holds %d KiB of the %d KiB its burst took", (after-base)>>10, (peak-base)>>10)
	}
	runtime.KeepAlive(keys)
}

// heapAlloc returns the bytes of live heap objects after a collection.
func heapAlloc() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// TestReservedTellsTheRestOfTheReservation: Reserved reports a live
// reservation with the time it has left, counted from when it was taken or
// its owner last refreshed it, and reports nothing for a key that is free,
// completed, released or lapsed, nor on a tracker that is not started.
func TestReservedTellsTheRestOfTheReservation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := New(Config{TTL: ttl})
		if d, ok := tr.Reserved("s", "k"); ok || d != 0 {
			t.Fatalf("unstarted: Reserved = %v, %v; want 0, false", d, ok)
		}
		tr.Start()
		defer tr.Stop()

		if d, ok := tr.Reserved("s", "k"); ok || d != 0 {
			t.Fatalf("free: Reserved = %v, %v; want 0, false", d, ok)
		}
		tok, _ := tr.Acquire("s", "k")
		if d, ok := tr.Reserved("s", "k"); !ok || d != ttl {
			t.Fatalf("just taken: Reserved = %v, %v; want %v, true", d, ok, ttl)
		}
		time.Sleep(10 * time.Minute)
		if d, ok := tr.Reserved("s", "k"); !ok || d != ttl-10*time.Minute {
			t.Fatalf("10 minutes on: Reserved = %v, %v; want %v, true", d, ok, ttl-10*time.Minute)
		}
		tr.ReserveOwned("s", "k", tok)
		time.Sleep(time.Minute)
		if d, ok := tr.Reserved("s", "k"); !ok || d != ttl-time.Minute {
			t.Fatalf("a minute after the owner's refresh: Reserved = %v, %v; want %v, true", d, ok, ttl-time.Minute)
		}
		if d, ok := tr.Reserved("other", "k"); ok || d != 0 {
			t.Fatalf("another scope: Reserved = %v, %v; want 0, false", d, ok)
		}
		time.Sleep(ttl - time.Minute - time.Nanosecond)
		if d, ok := tr.Reserved("s", "k"); !ok || d != time.Nanosecond {
			t.Fatalf("a nanosecond before it lapses: Reserved = %v, %v; want 1ns, true", d, ok)
		}
		time.Sleep(time.Nanosecond)
		if d, ok := tr.Reserved("s", "k"); ok || d != 0 {
			t.Fatalf("lapsed: Reserved = %v, %v; want 0, false", d, ok)
		}

		tok, _ = tr.Acquire("s", "k")
		tr.CompleteOwned("s", "k", tok)
		if d, ok := tr.Reserved("s", "k"); ok || d != 0 {
			t.Fatalf("completed: Reserved = %v, %v; want 0, false", d, ok)
		}
		tr.Release("s", "k")
		tok, _ = tr.Acquire("s", "k")
		tr.ReleaseOwned("s", "k", tok)
		if d, ok := tr.Reserved("s", "k"); ok || d != 0 {
			t.Fatalf("released: Reserved = %v, %v; want 0, false", d, ok)
		}
		tr.Reserve("s", "k")
		tr.Stop()
		if d, ok := tr.Reserved("s", "k"); ok || d != 0 {
			t.Fatalf("stopped: Reserved = %v, %v; want 0, false", d, ok)
		}
		var nilTracker *Tracker
		if d, ok := nilTracker.Reserved("s", "k"); ok || d != 0 {
			t.Fatalf("nil: Reserved = %v, %v; want 0, false", d, ok)
		}
	})
}

// TestReservedNeverExceedsTheTTL: with a Config.Now that goes backwards
// after a reservation was taken, Reserved reports the TTL, not the longer
// span the clock now shows until the deadline.
func TestReservedNeverExceedsTheTTL(t *testing.T) {
	t.Parallel()
	date := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	now := date
	var mu sync.Mutex
	tr := New(Config{TTL: ttl, Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }})
	tr.Start()
	defer tr.Stop()
	tr.Reserve("s", "k")
	mu.Lock()
	now = date.Add(-10 * time.Minute)
	mu.Unlock()
	if d, ok := tr.Reserved("s", "k"); !ok || d != ttl {
		t.Fatalf("Reserved = %v, %v after the clock went back; want %v, true", d, ok, ttl)
	}
}
