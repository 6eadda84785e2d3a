package idem

import (
	"encoding/binary"
	"math/bits"
	"unicode/utf8"
)

// fastDepth is the deepest nesting validJSON follows; deeper documents are
// left to encoding/json.
const fastDepth = 512

// validJSON reports whether b is a single JSON value (RFC 8259) whose
// strings are valid UTF-8: what json.Valid(b) && utf8.Valid(b) reports, in
// one pass and several times faster. It may also answer false for a valid
// document nested deeper than fastDepth, so a false is to be confirmed by
// the slow checks; a true is final.
func validJSON(b []byte) bool {
	var objects [fastDepth / 64]uint64 // bit d set: the container at depth d+1 is an object
	depth := 0
	i := skipSpace(b, 0)
	for {
		// A value starts at i.
		if i >= len(b) {
			return false
		}
		switch c := b[i]; c {
		case '{':
			if depth == fastDepth {
				return false
			}
			objects[depth/64] |= 1 << (depth % 64)
			depth++
			i = skipSpace(b, i+1)
			if i < len(b) && b[i] == '}' {
				depth--
				i++
				break
			}
			var ok bool
			if i, ok = memberName(b, i); !ok {
				return false
			}
			continue
		case '[':
			if depth == fastDepth {
				return false
			}
			objects[depth/64] &^= 1 << (depth % 64)
			depth++
			i = skipSpace(b, i+1)
			if i < len(b) && b[i] == ']' {
				depth--
				i++
				break
			}
			continue
		case '"':
			var ok bool
			if i, ok = scanString(b, i); !ok {
				return false
			}
		case 't':
			if !hasLiteral(b, i, "true") {
				return false
			}
			i += 4
		case 'f':
			if !hasLiteral(b, i, "false") {
				return false
			}
			i += 5
		case 'n':
			if !hasLiteral(b, i, "null") {
				return false
			}
			i += 4
		default:
			var ok bool
			if i, ok = scanNumber(b, i); !ok {
				return false
			}
		}
		// A value ended before i: close containers, or go on to the next
		// element or member.
		for {
			i = skipSpace(b, i)
			if depth == 0 {
				return i == len(b)
			}
			if i >= len(b) {
				return false
			}
			inObject := objects[(depth-1)/64]&(1<<((depth-1)%64)) != 0
			c := b[i]
			if c == ',' {
				i = skipSpace(b, i+1)
				if inObject {
					var ok bool
					if i, ok = memberName(b, i); !ok {
						return false
					}
				}
				break
			}
			if inObject && c == '}' || !inObject && c == ']' {
				depth--
				i++
				continue
			}
			return false
		}
	}
}

// memberName scans a member name, the colon and the space after it, and
// returns where the member's value starts.
func memberName(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '"' {
		return i, false
	}
	i, ok := scanString(b, i)
	if !ok {
		return i, false
	}
	i = skipSpace(b, i)
	if i >= len(b) || b[i] != ':' {
		return i, false
	}
	return skipSpace(b, i+1), true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

func hasLiteral(b []byte, i int, lit string) bool {
	return len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit
}

// plainString marks the bytes that stand for themselves inside a JSON
// string: not a quote, a backslash, a control character or a non-ASCII
// byte.
var plainString = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// scanString scans the string starting with the quote at b[i] and returns
// the index after its closing quote.
func scanString(b []byte, i int) (int, bool) {
	i++
	for i < len(b) {
		c := b[i]
		if plainString[c] {
			i++
			if i == len(b) || !plainString[b[i]] {
				continue
			}
			// A run of plain bytes: go on eight at a time. (Not after a
			// single one: in text dense with escapes or non-ASCII
			// characters, most runs are that short.)
			for i++; i+8 <= len(b); i += 8 {
				if m := notPlain(binary.LittleEndian.Uint64(b[i:])); m != 0 {
					i += bits.TrailingZeros64(m) / 8
					break
				}
			}
			continue
		}
		switch {
		case c == '"':
			return i + 1, true
		case c == '\\':
			if i+1 >= len(b) {
				return i, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if len(b)-i < 6 || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return i, false
				}
				i += 6
			default:
				return i, false
			}
		case c < 0x20:
			return i, false
		default: // non-ASCII
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				return i, false
			}
			i += size
		}
	}
	return i, false
}

// notPlain looks at eight bytes at once, the first in the low byte of x,
// and returns a mask whose lowest set bit is the top bit of the first byte
// that is not plain (see plainString), or 0 if all are. (Bits above the
// lowest may be set for plain bytes: a byte that is not plain borrows from
// the next one in the subtractions.)
func notPlain(x uint64) uint64 {
	const ones, tops = 0x0101010101010101, 0x8080808080808080
	// A byte b below 0x80 has its top bit set in b-n exactly when b < n;
	// bytes from 0x80 up have theirs set in x. The quote and backslash
	// become zero bytes under the xors, which then are below 1.
	control := x - ones*0x20
	quote := (x ^ ones*'"') - ones
	backslash := (x ^ ones*'\\') - ones
	return (control | quote | backslash | x) & tops
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// scanNumber scans the number starting at b[i]:
// -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?
func scanNumber(b []byte, i int) (int, bool) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return i, false
	case b[i] == '0':
		i++
	case '1' <= b[i] && b[i] <= '9':
		i = digits(b, i+1)
	default:
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return j, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return j, false
		}
		i = j
	}
	return i, true
}

func digits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}
