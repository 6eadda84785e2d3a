package memstore

import (
	"maps"
	"slices"
)

// records are the records of one namespace, and the order they expire in.
type records struct {
	byKey map[string]*entry
	// expiry holds the keys in the order of their records' expiry, so
	// that PurgeExpired takes the expired ones from the front instead of
	// walking byKey: its cost is that of the records it deletes, not the
	// number it keeps, whatever retentions and extensions they were
	// written with.
	expiry expiryHeap
	// Each record has one item in expiry for its current expiry; the
	// others are left by records released, replaced or extended since, and
	// are dropped by compact once they outnumber the records, so that
	// memory follows the records kept and not the Begins answered (a key
	// released and reserved again and again, by a client retrying a
	// failing request, leaves an item each time).
	//
	// peak is the most records byKey has held since it was made: a Go
	// map keeps the room of its largest size, so shrink makes a new one
	// once the records are a fraction of that.
	peak int
}

// shrinkFloor is the peak below which shrink leaves the map of records
// alone: a small map's room is not worth a copy.
const shrinkFloor = 1024

// compactSlack is how many items beyond twice the records the expiry
// heap may hold before compact runs.
var compactSlack = 256

func newRecords() *records {
	return &records{byKey: make(map[string]*entry)}
}

// written notes that the record under key was written, to expire at
// expires.
func (r *records) written(key string, expires int64) {
	r.expiry.push(expiryItem{key: key, expires: expires})
	r.peak = max(r.peak, len(r.byKey))
	if len(r.expiry.items) > 2*len(r.byKey)+compactSlack {
		r.compact()
	}
}

// compact drops the items that no longer stand for a record: at least
// half of them, as it runs only when they outnumber the records, so its
// cost is amortized over the writes that queued them. A record keeps the
// item of its current expiry.
func (r *records) compact() {
	items := r.expiry.items[:0]
	for _, it := range r.expiry.items {
		e := r.byKey[it.key]
		if e == nil || e.expires != it.expires || e.queued {
			continue // released, replaced, or written twice with the same expiry
		}
		e.queued = true
		items = append(items, it)
	}
	clear(r.expiry.items[len(items):])
	for _, it := range items {
		r.byKey[it.key].queued = false
	}
	if cap(items) > 2*len(items)+16 {
		items = slices.Clip(slices.Clone(items))
	}
	r.expiry.items = items
	r.expiry.init()
}

// purge deletes the records expired at asOf and returns how many.
func (r *records) purge(asOf int64) int {
	n := 0
	for !r.expiry.empty() && r.expiry.items[0].expires <= asOf {
		it := r.expiry.pop()
		// A key written again since has another item, later in the
		// heap; one deleted since has none to delete.
		if e := r.byKey[it.key]; e != nil && e.expires == it.expires {
			delete(r.byKey, it.key)
			n++
		}
	}
	// Once the items are under a quarter of the room, they move to a
	// slice of their size, so that a burst's room is given back.
	if items := r.expiry.items; cap(items) > 4*len(items)+shrinkFloor {
		r.expiry.items = slices.Clone(items)
	}
	r.shrink()
	return n
}

// shrink moves the records into a map of their size once they are under
// a quarter of the peak, so that the memory of a burst of records is given
// back when they are deleted. Its cost is amortized over the deletions
// that made the records fewer.
func (r *records) shrink() {
	if r.peak < shrinkFloor || 4*len(r.byKey) >= r.peak {
		return
	}
	byKey := make(map[string]*entry, len(r.byKey))
	maps.Copy(byKey, r.byKey)
	r.byKey, r.peak = byKey, len(byKey)
}

// empty reports whether r holds nothing at all.
func (r *records) empty() bool { return len(r.byKey) == 0 && r.expiry.empty() }

type expiryItem struct {
	key     string
	expires int64
}

// expiryHeap is a binary min-heap of items by expires. Records written in
// the order they expire (one retention, a clock that does not go back)
// are pushed at the bottom without a comparison with another item, whose
// reading, half the heap away, would cost a cache miss in a large store.
type expiryHeap struct {
	items []expiryItem
	// latest is at or after the expiry of every item: an item that
	// expires no earlier goes at the bottom as it is.
	latest int64
}

func (h *expiryHeap) empty() bool { return len(h.items) == 0 }

// push adds it.
func (h *expiryHeap) push(it expiryItem) {
	h.items = append(h.items, it)
	if len(h.items) == 1 || it.expires >= h.latest {
		h.latest = it.expires
		return
	}
	h.up(len(h.items) - 1)
}

// pop removes and returns the item that expires first. The heap must not
// be empty.
func (h *expiryHeap) pop() expiryItem {
	top := h.items[0]
	last := len(h.items) - 1
	h.items[0] = h.items[last]
	h.items[last] = expiryItem{}
	h.items = h.items[:last]
	if last > 0 {
		h.down(0)
	}
	return top
}

// init puts items in heap order.
func (h *expiryHeap) init() {
	for i := len(h.items)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *expiryHeap) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if h.items[parent].expires <= h.items[i].expires {
			return
		}
		h.items[parent], h.items[i] = h.items[i], h.items[parent]
		i = parent
	}
}

func (h *expiryHeap) down(i int) {
	n := len(h.items)
	for {
		least := i
		if l := 2*i + 1; l < n && h.items[l].expires < h.items[least].expires {
			least = l
		}
		if r := 2*i + 2; r < n && h.items[r].expires < h.items[least].expires {
			least = r
		}
		if least == i {
			return
		}
		h.items[i], h.items[least] = h.items[least], h.items[i]
		i = least
	}
}
