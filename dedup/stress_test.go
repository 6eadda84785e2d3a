package dedup

import (
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"pgregory.net/rapid"
)

// checkLRU verifies the internal consistency of c: the recency list links
// exactly c.n distinct nodes both ways, the table holds exactly one slot per
// node, every node is found from its home slot by the probe checkAndRecord
// makes, and every slot's distance and tag are right. It returns the keys
// from the most to the least recently used.
func checkLRU(c *lru) ([]Key, error) {
	var keys []Key
	seen := map[Key]bool{}
	prev := int32(-1)
	for i := c.head; i >= 0; i = c.nodes[i].next {
		if len(keys) > int(c.n) {
			return nil, fmt.Errorf("the recency list is longer than the %d nodes in use", c.n)
		}
		if i >= c.n {
			return nil, fmt.Errorf("node %d in the list is not in use (%d are)", i, c.n)
		}
		if c.nodes[i].prev != prev {
			return nil, fmt.Errorf("node %d: prev = %d, want %d", i, c.nodes[i].prev, prev)
		}
		k := c.nodes[i].key
		if seen[k] {
			return nil, fmt.Errorf("key %v is in the list twice", k)
		}
		seen[k] = true
		keys = append(keys, k)
		prev = i
	}
	if len(keys) != int(c.n) || c.tail != prev {
		return nil, fmt.Errorf("the list holds %d keys ending at %d; %d nodes are in use, tail %d", len(keys), prev, c.n, c.tail)
	}
	used := 0
	for j, s := range c.slots {
		if s == 0 {
			continue
		}
		used++
		idx := int32(s&c.idxMask) - 1
		if idx < 0 || idx >= c.n {
			return nil, fmt.Errorf("slot %d points at node %d, not in use", j, idx)
		}
		h := c.hash(&c.nodes[idx].key)
		if d := (uint64(j) - h) & c.mask; c.dist(s, uint64(j)) != d {
			return nil, fmt.Errorf("slot %d: distance %d, want %d", j, c.dist(s, uint64(j)), d)
		}
		if s&c.tagMask != c.tag(h) {
			return nil, fmt.Errorf("slot %d: wrong tag", j)
		}
	}
	if used != int(c.n) {
		return nil, fmt.Errorf("%d slots in use for %d nodes", used, c.n)
	}
	for idx := range c.n {
		h := c.hash(&c.nodes[idx].key)
		found := false
		for i := h & c.mask; c.slots[i] != 0; i = (i + 1) & c.mask {
			if int32(c.slots[i]&c.idxMask)-1 == idx {
				found = true
				break
			}
		}
		if !found {
			return nil, fmt.Errorf("node %d (key %v) is unreachable from its home slot", idx, c.nodes[idx].key)
		}
	}
	return keys, nil
}

// TestLRUStaysConsistent is white-box: after every step of a random
// sequence of keys, the window's list and table agree with each other and
// its recency order is the reference LRU's.
func TestLRUStaysConsistent(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		capacity := rapid.IntRange(1, 40).Draw(t, "capacity")
		pool := rapid.IntRange(1, 100).Draw(t, "pool")
		c := newLRU(capacity)
		ref := newRefLRU(capacity)
		for i := range rapid.IntRange(0, 400).Draw(t, "steps") {
			k := keyFrom(t, pool)
			c.checkAndRecord(k)
			ref.checkAndRecord(k)
			keys, err := checkLRU(&c)
			if err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
			j := 0
			for e := ref.order.Front(); e != nil; e = e.Next() {
				if keys[j] != e.Value.(Key) {
					t.Fatalf("step %d: key %d from the newest is %v, reference LRU has %v", i, j, keys[j], e.Value)
				}
				j++
			}
		}
	})
}

// writerKey is key i of writer g: distinct for every (g, i).
func writerKey(g, i int) Key {
	var k Key
	binary.LittleEndian.PutUint64(k[:8], uint64(g)+1)
	binary.LittleEndian.PutUint64(k[8:], uint64(i))
	return k
}

// TestWindowConcurrentEvictionKeepsNewest: writers racing to record fresh
// keys into a full window evict only the oldest ones. Whatever order the
// mutex gave their calls, the window ends up holding exactly the last Cap
// keys of that order, so each writer's remembered keys are the newest of
// its own, with no gap, and the list and table are consistent.
func TestWindowConcurrentEvictionKeepsNewest(t *testing.T) {
	t.Parallel()
	const capacity, writers, perWriter = 500, 8, 3000
	w := NewWindow(capacity)
	var wrong atomic.Int32
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for i := range perWriter {
				if !w.CheckAndRecord(writerKey(g, i)) {
					wrong.Add(1) // a fresh key must be new
				}
				if i%3 == 0 {
					// Seen again at once: a hit (or, if the other writers
					// evicted it meanwhile, recorded anew); either way it
					// stays the newest key of g.
					w.CheckAndRecord(writerKey(g, i))
				}
			}
		})
	}
	wg.Wait()
	if n := wrong.Load(); n != 0 {
		t.Fatalf("%d fresh keys looked old", n)
	}

	w.mu.Lock()
	keys, err := checkLRU(&w.c)
	w.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != capacity {
		t.Fatalf("the window holds %d keys, want %d", len(keys), capacity)
	}
	kept := make([]map[int]bool, writers)
	for g := range kept {
		kept[g] = map[int]bool{}
	}
	for _, k := range keys {
		g := int(binary.LittleEndian.Uint64(k[:8])) - 1
		kept[g][int(binary.LittleEndian.Uint64(k[8:]))] = true
	}
	for g, is := range kept {
		for i := perWriter - len(is); i < perWriter; i++ {
			if !is[i] {
				t.Errorf("writer %d: %d keys remembered, but not its key %d, which is newer than one of them", g, len(is), i)
			}
		}
	}
}

// TestSeqTrackerConcurrentMarksSurviveRebuilds: while other goroutines make
// and forget bursts of sessions, so that Forget keeps moving the marks to a
// fresh map, deliveries racing on a few long-lived sessions still apply
// each seqno exactly once, and every long-lived session ends with the
// highest seqno as its mark.
func TestSeqTrackerConcurrentMarksSurviveRebuilds(t *testing.T) {
	t.Parallel()
	const sessions, seqs, deliverers, churners = 4, 400, 6, 3
	long := func(i int) (s [16]byte) { s[0], s[1] = 'L', byte(i); return s }
	var s SeqTracker
	var applied [sessions][seqs]atomic.Int32
	var wg sync.WaitGroup
	for range deliverers {
		wg.Go(func() {
			for seq := range seqs {
				for i := range sessions {
					if s.ShouldApply(long(i), uint64(seq)) {
						applied[i][seq].Add(1)
					}
				}
			}
		})
	}
	for c := range churners {
		wg.Go(func() {
			for round := range 8 {
				burst := func(j int) (b [16]byte) {
					b[0], b[1], b[2] = 'B', byte(c), byte(round)
					binary.LittleEndian.PutUint32(b[4:], uint32(j))
					return b
				}
				for j := range 2 * seqShrinkFloor {
					s.ShouldApply(burst(j), uint64(j))
				}
				for j := range 2 * seqShrinkFloor {
					s.Forget(burst(j))
				}
			}
		})
	}
	wg.Wait()
	for i := range sessions {
		for seq := range seqs {
			if n := applied[i][seq].Load(); n != 1 {
				t.Errorf("session %d: seq %d applied %d times, want 1", i, seq, n)
			}
		}
		if hwm, ok := s.HighWater(long(i)); !ok || hwm != seqs-1 {
			t.Errorf("session %d: mark %d, %v; want %d, true", i, hwm, ok, seqs-1)
		}
	}
	if s.Len() != sessions {
		t.Errorf("Len = %d after every burst was forgotten, want %d", s.Len(), sessions)
	}
}

// TestFilterConcurrentSessionsAcceptEachOnce: goroutines redelivering the
// in-order streams of many sessions through one small Filter (its window
// far smaller than the operations) accept every operation exactly once:
// what the window evicts, the marks still catch.
func TestFilterConcurrentSessionsAcceptEachOnce(t *testing.T) {
	t.Parallel()
	const sessions, seqs, workers = 16, 200, 8
	f := NewFilter(64)
	var accepted [sessions][seqs]atomic.Int32
	var wg sync.WaitGroup
	for g := range workers {
		wg.Go(func() {
			for seq := range seqs {
				for j := range sessions {
					i := (j + g) % sessions
					session := [16]byte{'S', byte(i)}
					if f.Accept(session, uint64(seq), []byte(fmt.Sprint(i, "/", seq))) {
						accepted[i][seq].Add(1)
					}
				}
			}
		})
	}
	wg.Wait()
	for i := range sessions {
		for seq := range seqs {
			if n := accepted[i][seq].Load(); n != 1 {
				t.Errorf("session %d seq %d accepted %d times, want 1", i, seq, n)
			}
		}
	}
	if n := f.Window().Len(); n != 64 {
		t.Errorf("window Len = %d, want its capacity 64", n)
	}
}

// TestWindowCheckAndRecordAllocatesNothing pins the package doc's promise
// that CheckAndRecord never allocates, on hits, on new keys into a window
// not yet full, and on evictions from a full one.
func TestWindowCheckAndRecordAllocatesNothing(t *testing.T) {
	w := NewWindow(64)
	var i uint64
	if allocs := testing.AllocsPerRun(1000, func() {
		w.CheckAndRecord(testKey(i)) // new, evicting once the window is full
		w.CheckAndRecord(testKey(i)) // a hit
		i++
	}); allocs != 0 {
		t.Errorf("CheckAndRecord allocates %.2f times per call pair, want 0", allocs)
	}
	if w.Len() != 64 {
		t.Errorf("Len = %d, want the window full", w.Len())
	}
}
