package tracker

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestClockGoingBackwards pins what Config.Now says of readings that go
// backwards: each call judges a key by its own reading, so a key that had
// expired counts again while the clock is back before its deadline, until
// a sweep deletes it; and the reservation's rest never exceeds the TTL.
func TestClockGoingBackwards(t *testing.T) {
	t.Parallel()
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	var offset atomic.Int64
	set := func(d time.Duration) { offset.Store(int64(d)) }
	tr := New(Config{TTL: time.Hour, SweepInterval: 1000 * time.Hour, Now: func() time.Time {
		return start.Add(time.Duration(offset.Load()))
	}})
	tr.Start()
	defer tr.Stop()

	tr.Reserve("s", "k")
	set(2 * time.Hour)
	if tr.Seen("s", "k") {
		t.Fatal("the reservation is Seen past its deadline")
	}
	set(30 * time.Minute) // back before the deadline, nothing swept
	if !tr.Seen("s", "k") || tr.Reserve("s", "k") {
		t.Fatal("back before its deadline, the unswept reservation does not count")
	}
	if d, ok := tr.Reserved("s", "k"); !ok || d != 30*time.Minute {
		t.Errorf("Reserved = %v, %v; want 30m, true", d, ok)
	}
	set(-time.Hour) // further back than the reservation itself
	if d, ok := tr.Reserved("s", "k"); !ok || d != time.Hour {
		t.Errorf("Reserved = %v, %v before the reservation was taken; want the TTL, true", d, ok)
	}

	set(2 * time.Hour)
	tr.sweep()
	set(30 * time.Minute)
	if tr.Seen("s", "k") || tr.Len() != 0 {
		t.Error("a swept reservation came back with the clock")
	}
}
