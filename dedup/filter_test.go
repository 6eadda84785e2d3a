package dedup

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

func TestFilterAcceptsOnceThenDropsReplays(t *testing.T) {
	t.Parallel()
	s := [16]byte{'s'}
	f := NewFilter(16)
	for i, step := range []struct {
		seq  uint64
		op   string
		want bool
	}{
		{1, "a", true},
		{1, "a", false}, // replay
		{2, "b", true},
		{1, "a", false}, // late replay
		{2, "c", false}, // same seqno, other bytes: the mark decides
		{3, "c", true},
	} {
		if got := f.Accept(s, step.seq, []byte(step.op)); got != step.want {
			t.Errorf("step %d: Accept(%d, %q) = %v, want %v", i, step.seq, step.op, got, step.want)
		}
	}
}

// TestFilterChecksMarkBeforeWindow pins the design's order: a replay below
// the mark is dropped without touching the window, so it neither records its
// key nor evicts another.
func TestFilterChecksMarkBeforeWindow(t *testing.T) {
	t.Parallel()
	s := [16]byte{'s'}
	f := NewFilter(1)
	f.Accept(s, 1, []byte("a"))
	f.Accept(s, 2, []byte("b")) // the window now holds only key(2, b)
	if f.Accept(s, 1, []byte("a")) {
		t.Fatal("replay of seq 1 accepted")
	}
	if f.Window().CheckAndRecord(Derive(s, 2, []byte("b"))) {
		t.Error("the replay reached the window: key(2, b) was evicted")
	}
}

// TestFilterWindowCatchesWhatTheMarkForgot: after the session's mark is
// dropped, a recent replay is still caught by the window.
func TestFilterWindowCatchesWhatTheMarkForgot(t *testing.T) {
	t.Parallel()
	s := [16]byte{'s'}
	f := NewFilter(8)
	f.Accept(s, 1, []byte("a"))
	f.SeqTracker().Forget(s)
	if f.Accept(s, 1, []byte("a")) {
		t.Error("replay accepted after the mark was forgotten; the window should have caught it")
	}
	if !f.Accept(s, 2, []byte("b")) {
		t.Error("a new operation was dropped")
	}
}

// TestFilterMarkCatchesWhatTheWindowEvicted: a replay older than the window
// falls back to the mark.
func TestFilterMarkCatchesWhatTheWindowEvicted(t *testing.T) {
	t.Parallel()
	s := [16]byte{'s'}
	f := NewFilter(2)
	for seq := range uint64(10) {
		if !f.Accept(s, seq, []byte("op")) {
			t.Fatalf("seq %d dropped", seq)
		}
	}
	if f.Accept(s, 0, []byte("op")) {
		t.Error("replay of an evicted operation accepted")
	}
	// Only now look into the window (which records the key): the replay
	// must have been caught by the mark, not by the window.
	if !f.Window().CheckAndRecord(Derive(s, 0, []byte("op"))) {
		t.Error("key(0) was still in a 2-key window after 9 newer keys")
	}
}

func TestFilterConcurrentDuplicatesAcceptedOnce(t *testing.T) {
	t.Parallel()
	const ops, workers = 300, 12
	s := [16]byte{'s'}
	f := NewFilter(1024)
	var accepted [ops]atomic.Int32
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for seq := range uint64(ops) {
				if f.Accept(s, seq, []byte{byte(seq)}) {
					accepted[seq].Add(1)
				}
			}
		})
	}
	wg.Wait()
	for seq := range accepted {
		if n := accepted[seq].Load(); n != 1 {
			t.Errorf("seq %d accepted %d times, want 1", seq, n)
		}
	}
}

// TestZeroFilterIsUsable: a Filter declared without NewFilter drops replays
// as a new one does, with a window of DefaultCapacity keys, and its layers
// are usable through its accessors.
func TestZeroFilterIsUsable(t *testing.T) {
	t.Parallel()
	s := [16]byte{'s'}
	var f Filter
	if f.SeqTracker().Len() != 0 || f.Window().Len() != 0 || f.Window().Cap() != DefaultCapacity {
		t.Fatalf("zero Filter: %d marks, window %d of %d; want 0, 0 of %d",
			f.SeqTracker().Len(), f.Window().Len(), f.Window().Cap(), DefaultCapacity)
	}
	if !f.Accept(s, 1, []byte("a")) || f.Accept(s, 1, []byte("a")) {
		t.Error("zero Filter: want the operation accepted once")
	}
	if hwm, _ := f.SeqTracker().HighWater(s); hwm != 1 || f.Window().Len() != 1 {
		t.Errorf("after one operation: mark %d, window %d; want 1, 1", hwm, f.Window().Len())
	}
}

// TestNewFilterCheckedRejectsBadCapacity: as NewWindowChecked.
func TestNewFilterCheckedRejectsBadCapacity(t *testing.T) {
	t.Parallel()
	for _, capacity := range []int{0, -5, maxCapacity + 1} {
		f, err := NewFilterChecked(capacity)
		var ce *CapacityError
		if f != nil || !errors.As(err, &ce) || ce.Capacity != capacity {
			t.Errorf("NewFilterChecked(%d) = %v, %v; want nil and a *CapacityError", capacity, f, err)
		}
	}
	f, err := NewFilterChecked(4)
	if err != nil || f.Window().Cap() != 4 {
		t.Fatalf("NewFilterChecked(4) = %v", err)
	}
	if !f.Accept([16]byte{}, 0, nil) {
		t.Error("a checked Filter dropped a new operation")
	}
}
