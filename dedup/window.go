package dedup

import "sync"

// Window remembers the last Cap distinct keys it was shown, in exact
// least-recently-used order: once a key is recorded it is remembered until
// Cap other distinct keys have been recorded after its last sighting.
//
// A duplicate counts as a sighting: CheckAndRecord makes a key it reports
// as seen the most recently seen one, so a full window forgets the key
// least recently seen, not the one first seen. The Rust design this package
// follows says least-recently-seen too, but its check_and_record tests the
// key with LruCache::contains, which leaves the order alone, so there a key
// is forgotten Cap distinct keys after its first sighting however often it
// is redelivered. This Window keeps the documented behaviour, the safer of
// the two: a key still being redelivered stays remembered. Both agree on
// every stream in which no key is seen again before it would be forgotten.
//
// The zero Window is ready to use, as a sync.Mutex is: it remembers
// DefaultCapacity keys, and takes their memory on its first CheckAndRecord.
// A Window made by NewWindow or NewWindowChecked has the capacity asked for
// and all of its memory from the start. A Window must not be copied after
// first use.
//
// A Window is safe for concurrent use; every method takes one mutex and
// runs in constant time. Its memory, once allocated, never grows.
type Window struct {
	mu sync.Mutex
	c  lru // c.nodes is nil until a zero Window is first used
}

// NewWindow returns an empty Window that remembers up to capacity keys.
//
// It allocates, up front, 24 bytes per key for the recency list and 4 bytes
// per slot for an index of 2·capacity slots rounded up to a power of two: at
// most 40 bytes per key, about 32.4 bytes per key at 1,000,000 keys.
//
// NewWindow panics with a *CapacityError if capacity is below 1 or above
// 1<<28 - 1 (less on 32-bit platforms; see CapacityError): use it for a
// capacity written in the program, and NewWindowChecked for one that comes
// from configuration or other input.
func NewWindow(capacity int) *Window {
	w, err := NewWindowChecked(capacity)
	if err != nil {
		panic(err)
	}
	return w
}

// NewWindowChecked is NewWindow for a capacity that may be out of range: it
// returns a nil Window and a *CapacityError if capacity is below 1 or above
// 1<<28 - 1 (less on 32-bit platforms; see CapacityError), and never
// panics.
func NewWindowChecked(capacity int) (*Window, error) {
	if err := checkCapacity(capacity); err != nil {
		return nil, err
	}
	return &Window{c: newLRU(capacity)}, nil
}

// CheckAndRecord reports whether k is new: true the first time, false while
// the window remembers k. Either way k becomes the most recently seen key;
// recording a new key into a full window forgets the least recently seen
// one, which will look new again.
func (w *Window) CheckAndRecord(k Key) bool {
	w.mu.Lock()
	if w.c.nodes == nil {
		w.c = newLRU(DefaultCapacity)
	}
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

// Cap returns how many keys the window can remember: the capacity given to
// NewWindow, or DefaultCapacity for a zero Window.
func (w *Window) Cap() int {
	w.mu.Lock()
	n := len(w.c.nodes)
	w.mu.Unlock()
	if n == 0 {
		return DefaultCapacity
	}
	return n
}
