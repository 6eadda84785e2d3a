package dedup

import (
	"container/list"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"pgregory.net/rapid"
)

// refLRU is the reference model for Window: the textbook LRU set built from
// container/list and a map, obviously right and obviously slow.
type refLRU struct {
	cap   int
	order *list.List // front = most recently seen
	where map[Key]*list.Element
}

func newRefLRU(capacity int) *refLRU {
	return &refLRU{cap: capacity, order: list.New(), where: map[Key]*list.Element{}}
}

func (r *refLRU) checkAndRecord(k Key) bool {
	if e, ok := r.where[k]; ok {
		r.order.MoveToFront(e)
		return false
	}
	if r.order.Len() == r.cap {
		oldest := r.order.Back()
		delete(r.where, oldest.Value.(Key))
		r.order.Remove(oldest)
	}
	r.where[k] = r.order.PushFront(k)
	return true
}

// keyFrom draws keys from a small pool, so that the sequence revisits keys
// (hits), forgets them (evictions) and sees them again; the pool's keys
// differ in one byte only, which tests the hash mix as well.
func keyFrom(t *rapid.T, pool int) Key {
	var k Key
	k[rapid.IntRange(0, 15).Draw(t, "byte")] = byte(rapid.IntRange(0, pool-1).Draw(t, "value"))
	return k
}

// TestWindowMatchesReferenceLRU pins D2 and D3 against the model: every
// CheckAndRecord answer and every Len equals the reference LRU's.
func TestWindowMatchesReferenceLRU(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		capacity := rapid.IntRange(1, 64).Draw(t, "capacity")
		pool := rapid.IntRange(1, 160).Draw(t, "pool")
		w := NewWindow(capacity)
		ref := newRefLRU(capacity)
		steps := rapid.IntRange(0, 1000).Draw(t, "steps")
		for i := range steps {
			k := keyFrom(t, pool)
			got, want := w.CheckAndRecord(k), ref.checkAndRecord(k)
			if got != want {
				t.Fatalf("step %d: CheckAndRecord(%v) = %v, reference LRU says %v", i, k, got, want)
			}
			if got, want := w.Len(), ref.order.Len(); got != want {
				t.Fatalf("step %d: Len() = %d, reference LRU holds %d", i, got, want)
			}
		}
	})
}

// TestWindowMatchesReferenceLRULongRun drives a bigger window through a
// long random sequence (about half hits, half evictions), so that probe
// runs of the index grow long and are shifted back many times.
func TestWindowMatchesReferenceLRULongRun(t *testing.T) {
	t.Parallel()
	const capacity, pool, steps = 1000, 2000, 200_000
	r := rand.New(rand.NewPCG(1, 2))
	w := NewWindow(capacity)
	ref := newRefLRU(capacity)
	var hits int
	for i := range steps {
		k := testKey(r.Uint64N(pool))
		got, want := w.CheckAndRecord(k), ref.checkAndRecord(k)
		if got != want {
			t.Fatalf("step %d: CheckAndRecord(%v) = %v, reference LRU says %v", i, k, got, want)
		}
		if !got {
			hits++
		}
	}
	if hits == 0 || hits == steps {
		t.Fatalf("%d hits in %d steps: the sequence does not exercise both paths", hits, steps)
	}
}

// clusteredKey returns a key whose hash, under a window seeded with zeros,
// is exactly h: with the low half 1, the hash's multiply leaves the high half
// (xored with the mix constant) as it is.
func clusteredKey(h uint64) Key {
	var k Key
	binary.LittleEndian.PutUint64(k[:8], 1)
	binary.LittleEndian.PutUint64(k[8:], h^0x9e3779b97f4a7c15)
	return k
}

// TestLRUClusteredKeysMatchReference is white-box: it zeroes the hash seed
// and picks keys whose home slots crowd around the end of the table, so
// that probe runs wrap around, grow longer than a slot's distance field can
// count (the saturated path), and hold equal tags. The answers must still be
// the reference LRU's.
func TestLRUClusteredKeysMatchReference(t *testing.T) {
	t.Parallel()
	var saturated, wrapped int // runs that reached each situation
	rapid.Check(t, func(t *rapid.T) {
		capacity := rapid.IntRange(16, 64).Draw(t, "capacity")
		c := newLRU(capacity)
		c.seed0, c.seed1 = 0, 0
		size := c.mask + 1
		if got := c.hash(ptr(clusteredKey(size - 1))); got != size-1 {
			t.Fatalf("test premise: clustered key hashes to %d, want %d", got, size-1)
		}
		ref := newRefLRU(capacity)
		var sawSaturated, sawWrapped bool
		for i := range rapid.IntRange(0, 2000).Draw(t, "steps") {
			home := (size - 3 + rapid.Uint64Range(0, 4).Draw(t, "home")) & c.mask
			k := clusteredKey(home + size*rapid.Uint64Range(0, 30).Draw(t, "variant"))
			if got, want := c.checkAndRecord(k), ref.checkAndRecord(k); got != want {
				t.Fatalf("step %d: checkAndRecord(home %d) = %v, reference LRU says %v", i, home, got, want)
			}
			for j, s := range c.slots {
				if s == 0 {
					continue
				}
				d := c.dist(s, uint64(j))
				sawSaturated = sawSaturated || d >= distSaturated
				sawWrapped = sawWrapped || uint64(j) < d
			}
		}
		if c.len() != ref.order.Len() {
			t.Fatalf("len = %d, reference LRU holds %d", c.len(), ref.order.Len())
		}
		if sawSaturated {
			saturated++
		}
		if sawWrapped {
			wrapped++
		}
	})
	if saturated == 0 || wrapped == 0 {
		t.Errorf("of the runs, %d had a saturated distance and %d a wrapped probe run; want some of each", saturated, wrapped)
	}
}

func ptr[T any](v T) *T { return &v }

// TestSeqTrackerMatchesModel runs random sequences of SeqTracker calls
// against a plain map of marks, comparing every answer. Bulk applies and
// forgets over a pool of sessions larger than Forget's rebuild floor make
// the map grow past it and be rebuilt, which must keep every mark.
func TestSeqTrackerMatchesModel(t *testing.T) {
	t.Parallel()
	const pool = 3 * seqShrinkFloor
	session := func(i int) (s [16]byte) {
		binary.LittleEndian.PutUint64(s[8:], uint64(i))
		return s
	}
	rapid.Check(t, func(rt *rapid.T) {
		var s SeqTracker // the zero value, as NewSeqTracker's
		ref := map[[16]byte]uint64{}
		genSession := rapid.Custom(func(t *rapid.T) [16]byte { return session(rapid.IntRange(0, pool-1).Draw(t, "session")) })
		genSeq := rapid.Custom(func(t *rapid.T) uint64 {
			return rapid.SampledFrom([]uint64{0, 1, 2, 3, 1 << 32, ^uint64(0) - 1, ^uint64(0)}).Draw(t, "seq")
		})
		shouldApply := func(id [16]byte, seq uint64) bool {
			if hwm, ok := ref[id]; ok && seq <= hwm {
				return false
			}
			ref[id] = seq
			return true
		}
		rt.Repeat(map[string]func(*rapid.T){
			"ShouldApply": func(rt *rapid.T) {
				id, seq := genSession.Draw(rt, "id"), genSeq.Draw(rt, "seq")
				if got, want := s.ShouldApply(id, seq), shouldApply(id, seq); got != want {
					rt.Fatalf("ShouldApply(%x, %d) = %v, model says %v", id, seq, got, want)
				}
			},
			"ApplyMany": func(rt *rapid.T) {
				from := rapid.IntRange(0, pool-1).Draw(rt, "from")
				seq := genSeq.Draw(rt, "seq")
				for i := from; i < pool; i++ {
					if got, want := s.ShouldApply(session(i), seq), shouldApply(session(i), seq); got != want {
						rt.Fatalf("ShouldApply(session %d, %d) = %v, model says %v", i, seq, got, want)
					}
				}
			},
			"Advance": func(rt *rapid.T) {
				id, seq := genSession.Draw(rt, "id"), genSeq.Draw(rt, "seq")
				s.Advance(id, seq)
				if hwm, ok := ref[id]; !ok || seq > hwm {
					ref[id] = seq
				}
			},
			"Forget": func(rt *rapid.T) {
				id := genSession.Draw(rt, "id")
				s.Forget(id)
				delete(ref, id)
			},
			"ForgetMany": func(rt *rapid.T) {
				from := rapid.IntRange(0, pool-1).Draw(rt, "from")
				to := rapid.IntRange(from, pool).Draw(rt, "to")
				for i := from; i < to; i++ {
					s.Forget(session(i))
					delete(ref, session(i))
				}
			},
			"HighWater": func(rt *rapid.T) {
				id := genSession.Draw(rt, "id")
				got, gotOK := s.HighWater(id)
				want, wantOK := ref[id]
				if got != want || gotOK != wantOK {
					rt.Fatalf("HighWater(%x) = %d, %v; model says %d, %v", id, got, gotOK, want, wantOK)
				}
			},
			"": func(rt *rapid.T) {
				if got, want := s.Len(), len(ref); got != want {
					rt.Fatalf("Len = %d, model holds %d", got, want)
				}
			},
		})
	})
}
