package memstore

import (
	"maps"
	"slices"
)

// records are the records of one namespace, and the order they expire in.
type records struct {
	byKey map[string]*entry
	// expiry holds, for each retention in use, the keys in the order of
	// their records' expiry, so that PurgeExpired takes the expired ones
	// from the fronts instead of walking byKey: its cost is the number of
	// records it deletes, not the number it keeps. Records written with
	// one retention expire in the order they are written; a clock that
	// goes back is the exception, and is put in order on the way in. A
	// store sees few retentions (one per configuration), so few queues.
	expiry map[int64]*expiryQueue
	// queued counts the items of all queues. Each record has one item
	// for its current expiry; the others are left by records released,
	// replaced or extended since, and are dropped by compact once they
	// outnumber the records, so that memory follows the records kept and
	// not the Begins answered (a key released and reserved again and
	// again, by a client retrying a failing request, leaves an item each
	// time).
	queued int
	// peak is the most records byKey has held since it was made: a Go
	// map keeps the room of its largest size, so shrink makes a new one
	// once the records are a fraction of that.
	peak int
}

// shrinkFloor is the peak below which shrink leaves the map of records
// alone: a small map's room is not worth a copy.
const shrinkFloor = 1024

// compactSlack is how many items beyond twice the records the queues
// may hold before compact runs.
var compactSlack = 256

func newRecords() *records {
	return &records{byKey: make(map[string]*entry), expiry: make(map[int64]*expiryQueue)}
}

// written notes that the record under key was written with retention,
// to expire at expires.
func (r *records) written(key string, retention, expires int64) {
	q := r.expiry[retention]
	if q == nil {
		q = &expiryQueue{}
		r.expiry[retention] = q
	}
	q.push(expiryItem{key: key, expires: expires})
	r.peak = max(r.peak, len(r.byKey))
	if r.queued++; r.queued > 2*len(r.byKey)+compactSlack {
		r.compact()
	}
}

// compact drops the items that no longer stand for a record: at least
// half of them, as it runs only when they outnumber the records, so its
// cost is amortized over the writes that queued them. A record keeps the
// item of its current expiry, which every queue holds in order.
func (r *records) compact() {
	r.queued = 0
	for retention, q := range r.expiry {
		items := q.items[:0]
		for _, it := range q.items[q.head:] {
			e := r.byKey[it.key]
			if e == nil || e.expires != it.expires || e.queued {
				continue // released, replaced, or written twice with the same expiry
			}
			e.queued = true
			items = append(items, it)
		}
		clear(q.items[len(items):])
		if cap(items) > 2*len(items)+16 {
			items = slices.Clip(slices.Clone(items))
		}
		q.items, q.head = items, 0
		if q.empty() {
			delete(r.expiry, retention)
		}
		r.queued += len(items)
	}
	for _, q := range r.expiry {
		for _, it := range q.items {
			r.byKey[it.key].queued = false
		}
	}
}

// purge deletes the records expired at asOf and returns how many.
func (r *records) purge(asOf int64) int {
	n := 0
	for retention, q := range r.expiry {
		for it := range q.popExpired(asOf) {
			r.queued--
			// A key written again since has another item, later in
			// some queue; one deleted since has none to delete.
			if e := r.byKey[it.key]; e != nil && e.expires == it.expires {
				delete(r.byKey, it.key)
				n++
			}
		}
		if q.empty() {
			delete(r.expiry, retention)
		}
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
func (r *records) empty() bool { return len(r.byKey) == 0 && len(r.expiry) == 0 }

type expiryItem struct {
	key     string
	expires int64
}

// expiryQueue is a queue of items in the order of expires.
type expiryQueue struct {
	items []expiryItem // items[head:] are queued
	head  int
}

func (q *expiryQueue) empty() bool { return q.head == len(q.items) }

// push adds it, in order: at the back unless the clock went back.
func (q *expiryQueue) push(it expiryItem) {
	if q.empty() || q.items[len(q.items)-1].expires <= it.expires {
		q.items = append(q.items, it)
		return
	}
	i, _ := slices.BinarySearchFunc(q.items[q.head:], it.expires, func(a expiryItem, t int64) int {
		if a.expires <= t {
			return -1
		}
		return 1
	})
	q.items = slices.Insert(q.items, q.head+i, it)
}

// popExpired yields and removes the items expiring at or before asOf.
func (q *expiryQueue) popExpired(asOf int64) func(yield func(expiryItem) bool) {
	return func(yield func(expiryItem) bool) {
		for !q.empty() && q.items[q.head].expires <= asOf {
			it := q.items[q.head]
			q.items[q.head] = expiryItem{}
			q.head++
			if !yield(it) {
				break
			}
		}
		// Reclaim the front once it is at least half the slice: each item
		// is moved at most once per halving, so pushes stay O(1) amortized.
		// Once the items are under a quarter of the room, they move to a
		// slice of their size, so that a burst's room is given back.
		if q.head > 0 && 2*q.head >= len(q.items) {
			if rest := q.items[q.head:]; cap(q.items) > 4*len(rest)+shrinkFloor {
				q.items = slices.Clone(rest)
			} else {
				n := copy(q.items, rest)
				clear(q.items[n:])
				q.items = q.items[:n]
			}
			q.head = 0
		}
	}
}
