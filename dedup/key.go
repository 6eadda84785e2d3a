package dedup

import (
	"encoding/binary"
	"encoding/hex"
	"sync"

	"github.com/zeebo/blake3"
)

// Key identifies one operation of one session: the first 16 bytes of
// BLAKE3(session ‖ seq as 8 bytes little-endian ‖ op), in digest order.
//
// The Rust design this package follows stores the same 16 bytes as a u128
// read little-endian (u128::from_le_bytes), so Key is bit-compatible with it:
// byte i of Key is byte i of that integer's little-endian encoding.
type Key [16]byte

// String returns the key as 32 lowercase hexadecimal digits, in byte order.
func (k Key) String() string {
	return hex.EncodeToString(k[:])
}

// deriveHeader is the length of the fixed prefix of the hashed input: a
// 16-byte session id followed by an 8-byte sequence number.
const deriveHeader = 16 + 8

// deriveBlock, deriveSmall and deriveChunk are the sizes of the stack
// buffers Derive hashes from. BLAKE3 compresses an input of up to one chunk
// (1024 bytes) without its tree state, which is what blake3.Sum256 does;
// short inputs get smaller buffers because zeroing a whole chunk costs a
// tenth of their hash. Inputs of up to one 64-byte block get a buffer of
// exactly a block. Laying the input out costs Derive 10–15 % over a bare
// hash of the same bytes for inputs of up to a few blocks (measured in
// bench/dedup_test.go), less for longer ones.
const (
	deriveBlock = 64
	deriveSmall = 128
	deriveChunk = 1024
)

// Derive returns the Key of operation op, numbered seq, of session.
//
// The same inputs give the same Key in every process and on every platform;
// Derive is safe for concurrent use and allocates nothing. Operations of up
// to 1000 bytes are hashed from a stack buffer; longer ones stream through a
// pooled hasher.
func Derive(session [16]byte, seq uint64, op []byte) Key {
	switch n := deriveHeader + len(op); {
	case n <= deriveBlock:
		var buf [deriveBlock]byte
		return deriveFrom(buf[:n], session, seq, op)
	case n <= deriveSmall:
		var buf [deriveSmall]byte
		return deriveFrom(buf[:n], session, seq, op)
	case n <= deriveChunk:
		var buf [deriveChunk]byte
		return deriveFrom(buf[:n], session, seq, op)
	default:
		return deriveLong(session, seq, op)
	}
}

// deriveFrom lays session, seq and op out in buf, which has exactly their
// length, and hashes it in one call.
func deriveFrom(buf []byte, session [16]byte, seq uint64, op []byte) Key {
	putHeader(buf, session, seq)
	copy(buf[deriveHeader:], op)
	// Sum512's first 32 bytes are Sum256 (BLAKE3 is an XOF); asking for 64
	// skips the copy Sum256 makes of Sum512's result, about a twentieth of
	// the hash of a short input (measured).
	sum := blake3.Sum512(buf)
	return Key(sum[:16])
}

// putHeader writes session ‖ seq (little-endian) to the first deriveHeader
// bytes of dst.
func putHeader(dst []byte, session [16]byte, seq uint64) {
	copy(dst[:16], session[:])
	binary.LittleEndian.PutUint64(dst[16:deriveHeader], seq)
}

// hashers holds reusable BLAKE3 hashers for operations too long for the
// stack path; each holds an 8 KiB buffer, so making one per call would cost
// far more than the hash itself.
var hashers = sync.Pool{New: func() any { return blake3.New() }}

func deriveLong(session [16]byte, seq uint64, op []byte) Key {
	var hdr [deriveHeader]byte
	putHeader(hdr[:], session, seq)

	h := hashers.Get().(*blake3.Hasher)
	h.Reset()
	_, _ = h.Write(hdr[:])
	_, _ = h.Write(op)
	var sum [32]byte
	h.Sum(sum[:0])
	hashers.Put(h)

	return Key(sum[:16])
}
