package dedup

import (
	"encoding/binary"
	"math"
	"math/bits"
	"math/rand/v2"
	"unsafe"
)

// lru is the unsynchronised core of Window: an exact least-recently-used
// set of at most len(nodes) keys.
//
// Recency is a doubly linked list threaded through a slab of nodes by int32
// indices; the slab is allocated once, so recording a key never allocates.
// Lookup is an open-addressing table with linear probing, at least twice as
// many slots as nodes, so probe runs stay short. An evicted key leaves no
// tombstone (backward-shift deletion), so a window that has evicted billions
// of keys probes as fast as a fresh one.
//
// A slot is one uint32: 0 when empty, otherwise, from the low bits up, the
// node index plus one (idxBits), the entry's distance from its home slot
// (distBits, saturating) and as many top bits of the key's hash as are left
// (the tag). The tag lets a probe rule a key out without loading its node;
// the distance lets a deletion shift entries back without loading theirs.
type lru struct {
	nodes []node
	slots []uint32
	mask  uint64 // len(slots) - 1; len(slots) is a power of two

	idxBits uint
	idxMask uint32 // the index bits of a slot
	tagMask uint32 // the tag bits of a slot: those above idxBits + distBits

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

// distBits is the width of a slot's distance field; distSaturated, its
// largest value, means "this far or farther: compute it from the key".
const (
	distBits      = 4
	distSaturated = 1<<distBits - 1
)

// maxCapacity is the largest capacity a Window accepts: a slot must hold a
// node index plus one and a distance in 32 bits (leaving no tag bits at
// this size), and the node slab's size in bytes must be an int, which on a
// 32-bit platform caps it lower (math.MaxInt / 24 = 89,478,485), where make
// would otherwise panic.
const maxCapacity = min(1<<(32-distBits)-1, int(math.MaxInt/unsafe.Sizeof(node{})))

func newLRU(capacity int) lru {
	size := uint64(1) << bits.Len64(uint64(2*capacity-1)) // smallest power of two >= 2*capacity
	idxBits := uint(bits.Len32(uint32(capacity)))         // enough for capacity itself, the largest index+1
	return lru{
		nodes:   make([]node, capacity),
		slots:   make([]uint32, size),
		mask:    size - 1,
		idxBits: idxBits,
		idxMask: uint32(1)<<idxBits - 1,
		tagMask: ^uint32(0) << (idxBits + distBits), // 0 when that is 32: no tag bits left
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

// tag returns the bits of h a slot stores above its index and distance: the
// top bits of h, independent of the low bits that choose the home slot.
func (c *lru) tag(h uint64) uint32 {
	return uint32(h>>32) & c.tagMask
}

// slot packs an entry for node idx at distance dist from its home.
func (c *lru) slot(tag uint32, dist uint64, idx int32) uint32 {
	return tag | uint32(min(dist, distSaturated))<<c.idxBits | uint32(idx+1)
}

// dist returns how far the entry s, found in slot j, is from its home slot.
func (c *lru) dist(s uint32, j uint64) uint64 {
	if d := uint64(s>>c.idxBits) & distSaturated; d < distSaturated {
		return d
	}
	home := c.hash(&c.nodes[int32(s&c.idxMask)-1].key) & c.mask
	return (j - home) & c.mask
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
		if s&c.tagMask == tag {
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
	home := h & c.mask
	i := home
	for c.slots[i] != 0 {
		i = (i + 1) & c.mask
	}
	c.slots[i] = c.slot(tag, (i-home)&c.mask, idx)
	return true
}

// removeSlot deletes node idx from the table, shifting later entries of its
// probe run back so that every entry stays reachable from its home slot.
func (c *lru) removeSlot(idx int32) {
	want := uint32(idx + 1)
	i := c.hash(&c.nodes[idx].key) & c.mask
	for c.slots[i]&c.idxMask != want {
		i = (i + 1) & c.mask
	}
	// i is now a hole. Move into it the next entry whose home slot is not
	// cyclically within (i, j], that is, which is at least as far from its
	// home as from the hole; such an entry could not be found past the hole
	// otherwise.
	for j := (i + 1) & c.mask; ; j = (j + 1) & c.mask {
		s := c.slots[j]
		if s == 0 {
			break
		}
		gap := (j - i) & c.mask
		if d := c.dist(s, j); d >= gap {
			c.slots[i] = c.slot(s&c.tagMask, d-gap, int32(s&c.idxMask)-1)
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
