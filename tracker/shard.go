package tracker

import "sync"

// scopedKey is a map key made of the caller's strings as they are: building
// it copies two string headers and allocates nothing.
type scopedKey struct {
	scope, key string
}

// entry is what the tracker knows about a key: a reservation held by the
// owner token, or a completed key when owner is 0, and when it expires.
type entry struct {
	deadline int64 // nanoseconds since the tracker's epoch
	owner    uint64
}

// live reports whether the entry still counts at time now. A key whose
// entry is no longer live is treated as absent by every method, whether or
// not the sweeper has deleted it yet.
func (e entry) live(now int64) bool { return now < e.deadline }

// shard is one independently locked partition of the keys, padded to a
// cache line of its own so that cores working on different shards do not
// contend for one.
type shard struct {
	mu   sync.Mutex
	keys map[scopedKey]entry
	// peak is the most keys the map has held since it was made: a Go map
	// keeps the memory of its largest size, which the sweep gives back by
	// making a fresh one when few of them are left.
	peak int
	// minted counts the owner tokens handed out here. It only grows, also
	// across Reset, Stop and Start, so a stale token never matches a newer
	// reservation of the same key (a key always maps to the same shard).
	minted uint64
	id     uint64 // the shard's index, which tells its tokens from other shards'
	_      [24]byte
}

// shrinkFloor is the peak size below which a shard's map is never rebuilt:
// Go keeps a map of so few keys in one group of eight slots (a few hundred
// bytes), which a fresh map takes again with its first key. The floor must
// stay that low: a burst spread over many shards leaves each only a few of
// its keys, so a higher floor, multiplied by the shards, would keep most
// of the burst's memory for good.
const shrinkFloor = 8

// put stores e under k and keeps s.peak; s.mu must be held.
func (s *shard) put(k scopedKey, e entry) {
	s.keys[k] = e
	s.peak = max(s.peak, len(s.keys))
}

// mint returns a token no other reservation of this tracker ever had: the
// shard's count in the high bits and its index (below maxShards) in the low
// 16 bits. The count would take 2^48 reservations on one shard to wrap.
func (s *shard) mint() uint64 {
	s.minted++
	return s.minted<<16 | s.id
}

// sweep deletes the entries that are no longer live at now. A Go map never
// shrinks, so when that (or Release) has left the map under a quarter of its
// peak, and the peak was at least shrinkFloor, sweep moves the live entries
// to a fresh map sized for them and lets the old one go. The copy is of at
// most a quarter of the entries deleted since the map was made, so it costs
// less than the deletions did.
func (s *shard) sweep(now int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, e := range s.keys {
		if !e.live(now) {
			delete(s.keys, k)
		}
	}
	if s.peak < shrinkFloor || len(s.keys) >= s.peak/4 {
		return
	}
	fresh := make(map[scopedKey]entry, len(s.keys))
	for k, e := range s.keys {
		fresh[k] = e
	}
	s.keys = fresh
	s.peak = len(fresh)
}
