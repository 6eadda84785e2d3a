package dedup

import (
	"container/list"
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
