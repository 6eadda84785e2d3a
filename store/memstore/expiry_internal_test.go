package memstore

import (
	"math/rand/v2"
	"testing"
)

// The expiry heap gives its items back in expiry order whatever the order
// they were pushed in: mostly rising (the common case, pushed without a
// comparison), sometimes earlier than all before, equal, or after pops
// that leave the bound it keeps above every item.
func TestExpiryHeapOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var h expiryHeap
	var pending []int64 // what the heap holds, as a multiset
	next := int64(1000)
	for step := range 20000 {
		switch x := r.IntN(10); {
		case x < 6: // rising, as one retention writes
			next += r.Int64N(3)
			h.push(expiryItem{expires: next})
			pending = append(pending, next)
		case x < 8: // earlier: another retention, a clock gone back
			e := next - r.Int64N(500)
			h.push(expiryItem{expires: e})
			pending = append(pending, e)
		default:
			if h.empty() {
				continue
			}
			got := h.pop()
			least := 0
			for i, e := range pending {
				if e < pending[least] {
					least = i
				}
			}
			if got.expires != pending[least] {
				t.Fatalf("step %d: pop = %d, want the earliest, %d", step, got.expires, pending[least])
			}
			pending = append(pending[:least], pending[least+1:]...)
		}
	}
}
