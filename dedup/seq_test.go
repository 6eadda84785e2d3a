package dedup

import (
	"encoding/binary"
	"sync"
	"sync/atomic"
	"testing"
)

// TestSeqTrackerNeverReappliesAtOrBelowHWM pins D4 step by step.
func TestSeqTrackerNeverReappliesAtOrBelowHWM(t *testing.T) {
	t.Parallel()
	a, b := [16]byte{'a'}, [16]byte{'b'}
	s := NewSeqTracker()
	for i, step := range []struct {
		session [16]byte
		seq     uint64
		want    bool
	}{
		{a, 0, true},  // a session without a mark applies anything, 0 too
		{a, 0, false}, // at the mark
		{a, 5, true},  // gaps are fine
		{a, 5, false}, // at the mark
		{a, 3, false}, // below the mark
		{b, 3, true},  // sessions are independent
		{a, 6, true},
		{b, 2, false},
		{a, ^uint64(0), true},
		{a, ^uint64(0), false},
	} {
		if got := s.ShouldApply(step.session, step.seq); got != step.want {
			t.Errorf("step %d: ShouldApply(%q, %d) = %v, want %v", i, step.session[0], step.seq, got, step.want)
		}
	}
	if hwm, ok := s.HighWater(b); !ok || hwm != 3 {
		t.Errorf("HighWater(b) = %d, %v; want 3, true", hwm, ok)
	}
	if s.Len() != 2 {
		t.Errorf("Len = %d, want 2", s.Len())
	}
}

func TestSeqTrackerAdvanceNeverLowers(t *testing.T) {
	t.Parallel()
	a := [16]byte{'a'}
	s := NewSeqTracker()
	if _, ok := s.HighWater(a); ok {
		t.Fatal("new tracker has a mark for a")
	}
	s.Advance(a, 10)
	s.Advance(a, 4)
	if hwm, _ := s.HighWater(a); hwm != 10 {
		t.Errorf("after Advance(10), Advance(4): mark = %d, want 10", hwm)
	}
	if s.ShouldApply(a, 10) {
		t.Error("ShouldApply(10) after Advance(10) = true")
	}
	if !s.ShouldApply(a, 11) {
		t.Error("ShouldApply(11) after Advance(10) = false")
	}
}

func TestSeqTrackerForget(t *testing.T) {
	t.Parallel()
	a := [16]byte{'a'}
	s := NewSeqTracker()
	s.ShouldApply(a, 7)
	s.Forget(a)
	if _, ok := s.HighWater(a); ok || s.Len() != 0 {
		t.Fatalf("after Forget: HighWater ok = %v, Len = %d", ok, s.Len())
	}
	if !s.ShouldApply(a, 7) {
		t.Error("after Forget, ShouldApply(7) = false, want the session to start afresh")
	}
}

// TestSeqTrackerConcurrentDeliveriesApplyOnce pins D4 under concurrency:
// goroutines each redelivering one session's stream in order apply every
// seqno exactly once between them.
func TestSeqTrackerConcurrentDeliveriesApplyOnce(t *testing.T) {
	t.Parallel()
	const seqs, workers = 500, 16
	session := [16]byte{'s'}
	s := NewSeqTracker()
	var applied [seqs]atomic.Int32
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for seq := range uint64(seqs) {
				if s.ShouldApply(session, seq) {
					applied[seq].Add(1)
				}
			}
		})
	}
	wg.Wait()
	for seq := range applied {
		if n := applied[seq].Load(); n != 1 {
			t.Errorf("seq %d applied %d times, want 1", seq, n)
		}
	}
}

// TestZeroSeqTrackerIsUsable: a SeqTracker declared without NewSeqTracker
// knows no session and works as a new one does.
func TestZeroSeqTrackerIsUsable(t *testing.T) {
	t.Parallel()
	a, b := [16]byte{'a'}, [16]byte{'b'}
	var s SeqTracker
	if _, ok := s.HighWater(a); ok || s.Len() != 0 {
		t.Fatal("a zero SeqTracker knows a session")
	}
	s.Forget(a)
	if !s.ShouldApply(a, 3) || s.ShouldApply(a, 3) {
		t.Error("ShouldApply on a zero SeqTracker: want true, then false")
	}
	var s2 SeqTracker
	s2.Advance(b, 7)
	if hwm, ok := s2.HighWater(b); !ok || hwm != 7 || s2.ShouldApply(b, 7) {
		t.Errorf("Advance on a zero SeqTracker: HighWater = %d, %v; want 7, true", hwm, ok)
	}
}

// TestSeqTrackerForgetReturnsMemory checks Forget's promise that a
// forgotten session's memory is freed: once a burst of sessions has been
// forgotten, the heap is back near where it was before the burst (a Go map
// never shrinks, so Forget must replace it), and the marks of the sessions
// still known are kept.
func TestSeqTrackerForgetReturnsMemory(t *testing.T) {
	const burst = 200_000
	session := func(i int) (s [16]byte) {
		binary.LittleEndian.PutUint64(s[:], uint64(i))
		return s
	}
	s := NewSeqTracker()
	s.ShouldApply(session(burst), 41) // kept throughout
	base := heapInUse()
	for i := range burst {
		s.ShouldApply(session(i), uint64(i))
	}
	peak := heapInUse()
	for i := range burst {
		s.Forget(session(i))
	}
	after := heapInUse()
	t.Logf("heap above the start: %d KiB with the burst, %d KiB after Forget", (peak-base)>>10, (after-base)>>10)
	if after > base+(peak-base)/8 {
		t.Errorf("after forgetting every session of the burst the tracker still holds %d KiB of the %d KiB it took", (after-base)>>10, (peak-base)>>10)
	}
	if hwm, ok := s.HighWater(session(burst)); !ok || hwm != 41 || s.Len() != 1 {
		t.Errorf("the session not forgotten: HighWater = %d, %v, Len = %d; want 41, true, 1", hwm, ok, s.Len())
	}
	for i := range 3 {
		if !s.ShouldApply(session(i), 0) {
			t.Errorf("forgotten session %d does not start afresh", i)
		}
	}
}

// TestSeqTrackerDoesNotWrapAround: a session whose mark reached the largest
// uint64 applies nothing more, 0 included, through ShouldApply or a Filter,
// until it is forgotten; Advance cannot lower the mark either.
func TestSeqTrackerDoesNotWrapAround(t *testing.T) {
	t.Parallel()
	const top = ^uint64(0)
	a := [16]byte{'a'}
	f := NewFilter(4)
	s := f.SeqTracker()
	if !f.Accept(a, top, []byte("last")) {
		t.Fatal("the largest seqno was not accepted")
	}
	for _, seq := range []uint64{0, 1, top - 1, top} {
		if s.ShouldApply(a, seq) || f.Accept(a, seq, []byte("after")) {
			t.Errorf("seq %d applied after the mark reached the largest uint64", seq)
		}
	}
	s.Advance(a, 0)
	if hwm, _ := s.HighWater(a); hwm != top {
		t.Errorf("mark %d after Advance(0), want %d", hwm, top)
	}
	s.Forget(a)
	if !f.Accept(a, 0, []byte("again")) {
		t.Error("a forgotten session does not start again at 0")
	}
}
