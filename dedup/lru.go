package dedup

import (
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
)

// lru is the unsynchronised core of Window: an exact least-recently-used
// set of at most len(nodes) keys.
//
// Recency is a doubly linked list threaded through a slab of nodes by int32
// indices; the slab is allocated once, so recording a key never allocates.
// Lookup is an open-addressing table with linear probing whose slots hold a
// node index and a few bits of the key's hash, so a probe rarely has to load
// a node to rule a key out. The table has at least twice as many slots as
// the slab has nodes, so a probe sequence stays short; an evicted key leaves
// no tombstone (backward-shift deletion), so a window that has evicted
// billions of keys probes as fast as a fresh one.
type lru struct {
	nodes []node
	slots []uint32
	mask  uint64 // len(slots) - 1; len(slots) is a power of two

	// A slot is 0 when empty; otherwise its low idxBits bits are a node
	// index plus one and the bits above are the top bits of the key's hash.
	idxBits uint
	idxMask uint32

	head, tail int32 // most and least recently used node; -1 when empty
	n          int32 // nodes in use; they are nodes[:n]

	seed0, seed1 uint64 // per-window hash seed, so no input can be crafted to collide
}

// node is one remembered key and its neighbours in recency order: prev is
// the more recently used one, next the less recently used one.
type node struct {
	key        Key
	prev, next int32
}

// nodeBytes and slotBytes are the sizes of a node and a table slot, for the
// memory bound documented on NewWindow.
const (
	nodeBytes = 24
	slotBytes = 4
)

// maxCapacity is the largest capacity a Window accepts: node indices plus
// one must fit in an int32, and the table (two slots per node, rounded up to
// a power of two) in a slice.
const maxCapacity = 1 << 30

func newLRU(capacity int) lru {
	size := uint64(1) << bits.Len64(uint64(2*capacity-1)) // smallest power of two >= 2*capacity
	idxBits := uint(bits.Len32(uint32(capacity)))         // enough for capacity itself, the largest index+1
	return lru{
		nodes:   make([]node, capacity),
		slots:   make([]uint32, size),
		mask:    size - 1,
		idxBits: idxBits,
		idxMask: uint32(1)<<idxBits - 1,
		head:    -1,
		tail:    -1,
		seed0:   rand.Uint64(),
		seed1:   rand.Uint64(),
	}
}

// hash mixes the key with the window's seed. The two halves of a Key are
// uniformly distributed when it comes from Derive, but a Window accepts any
// Key, so the mix must also spread keys that differ in a single byte.
func (c *lru) hash(k *Key) uint64 {
	a := binary.LittleEndian.Uint64(k[:8]) ^ c.seed0
	b := binary.LittleEndian.Uint64(k[8:]) ^ c.seed1
	hi, lo := bits.Mul64(a, b^0x9e3779b97f4a7c15)
	return hi ^ lo
}

// tag returns the bits of h stored in a slot above the node index.
func (c *lru) tag(h uint64) uint32 {
	return uint32(h>>32) &^ c.idxMask
}

// checkAndRecord reports whether k was absent, and makes k the most
// recently used key either way, evicting the least recently used key if k
// is new and the window is full.
func (c *lru) checkAndRecord(k Key) bool {
	h := c.hash(&k)
	tag := c.tag(h)
	for i := h & c.mask; ; i = (i + 1) & c.mask {
		s := c.slots[i]
		if s == 0 {
			break
		}
		if s&^c.idxMask == tag {
			if idx := int32(s&c.idxMask) - 1; c.nodes[idx].key == k {
				c.moveToFront(idx)
				return false
			}
		}
	}

	var idx int32
	if int(c.n) < len(c.nodes) {
		idx = c.n
		c.n++
	} else {
		idx = c.tail
		c.unlink(idx)
		c.removeSlot(idx)
	}
	c.nodes[idx].key = k
	c.pushFront(idx)

	// The eviction may have shifted entries, so find the empty slot afresh.
	i := h & c.mask
	for c.slots[i] != 0 {
		i = (i + 1) & c.mask
	}
	c.slots[i] = tag | uint32(idx+1)
	return true
}

// removeSlot deletes node idx from the table, shifting later entries of its
// probe run back so that every entry stays reachable from its home slot.
func (c *lru) removeSlot(idx int32) {
	h := c.hash(&c.nodes[idx].key)
	want := c.tag(h) | uint32(idx+1)
	i := h & c.mask
	for c.slots[i] != want {
		i = (i + 1) & c.mask
	}
	// i is now a hole. Move into it the next entry whose home slot is not
	// cyclically within (i, j]; such an entry could not be found past the
	// hole otherwise.
	for j := (i + 1) & c.mask; ; j = (j + 1) & c.mask {
		s := c.slots[j]
		if s == 0 {
			break
		}
		home := c.hash(&c.nodes[int32(s&c.idxMask)-1].key) & c.mask
		if (j-home)&c.mask >= (j-i)&c.mask {
			c.slots[i] = s
			i = j
		}
	}
	c.slots[i] = 0
}

func (c *lru) pushFront(idx int32) {
	n := &c.nodes[idx]
	n.prev = -1
	n.next = c.head
	if c.head >= 0 {
		c.nodes[c.head].prev = idx
	} else {
		c.tail = idx
	}
	c.head = idx
}

func (c *lru) unlink(idx int32) {
	n := &c.nodes[idx]
	if n.prev >= 0 {
		c.nodes[n.prev].next = n.next
	} else {
		c.head = n.next
	}
	if n.next >= 0 {
		c.nodes[n.next].prev = n.prev
	} else {
		c.tail = n.prev
	}
}

func (c *lru) moveToFront(idx int32) {
	if c.head == idx {
		return
	}
	c.unlink(idx)
	c.pushFront(idx)
}

// len returns how many keys are remembered.
func (c *lru) len() int { return int(c.n) }
