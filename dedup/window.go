package dedup

import (
	"fmt"
	"sync"
)

// Window remembers the last Cap distinct keys it was shown, in exact
// least-recently-used order: once a key is recorded it is remembered until
// Cap other distinct keys have been recorded after its last sighting.
//
// A Window is safe for concurrent use; every method takes one mutex and
// runs in constant time. Its memory is allocated once, by NewWindow, and
// never grows.
type Window struct {
	mu sync.Mutex
	c  lru
}

// NewWindow returns an empty Window that remembers up to capacity keys.
//
// It allocates, up front, 24 bytes per key for the recency list and 4 bytes
// per slot for an index of 2·capacity slots rounded up to a power of two: at
// most 40 bytes per key, about 32.4 bytes per key at 1,000,000 keys.
//
// NewWindow panics if capacity is below 1 or above 1<<28 - 1.
func NewWindow(capacity int) *Window {
	if capacity < 1 || capacity > maxCapacity {
		panic(fmt.Sprintf("dedup: NewWindow capacity must be in [1, %d], got %d", maxCapacity, capacity))
	}
	return &Window{c: newLRU(capacity)}
}

// CheckAndRecord reports whether k is new: true the first time, false while
// the window remembers k. Either way k becomes the most recently seen key;
// recording a new key into a full window forgets the least recently seen
// one, which will look new again.
func (w *Window) CheckAndRecord(k Key) bool {
	w.mu.Lock()
	isNew := w.c.checkAndRecord(k)
	w.mu.Unlock()
	return isNew
}

// Len returns how many keys the window remembers: 0 when new, never more
// than Cap.
func (w *Window) Len() int {
	w.mu.Lock()
	n := w.c.len()
	w.mu.Unlock()
	return n
}

// Cap returns how many keys the window can remember, as given to NewWindow.
func (w *Window) Cap() int {
	return len(w.c.nodes)
}
