package pgstorable

import (
	"bytes"
	"math"
	"strconv"
	"strings"
)

// MaxRenderedSize is the largest size RenderedSize reports: a document
// that would print larger is reported at this size. It is beyond every
// value PostgreSQL prints (at most 1 GiB), and keeps the count within an
// int everywhere.
const MaxRenderedSize = math.MaxInt32

// RenderedSize is the size of doc, valid JSON whose numbers jsonb stores
// (JSONB returns nil for it), with each number that has an exponent
// counted at the length PostgreSQL prints it back from jsonb: spelled out
// without the exponent, every digit written (see numericLength). 1e131071
// is 8 bytes as sent and 131072 as printed, so a small document can print
// as more than the 1 GiB a value may be, and fail every read of its row.
// Everything else counts as written, which it prints at most as long as,
// but for the space jsonb prints after each comma and colon: the printed
// document is at most half as large again as RenderedSize says.
//
// The common document costs one pass over its bytes: only a digit followed
// by e or E can start an exponent, and a document without such a pair is
// its own length. Otherwise RenderedSize reads it number by number, still
// in linear time. A size beyond MaxRenderedSize is reported as
// MaxRenderedSize.
func RenderedSize(doc []byte) int {
	if !mayHaveExponent(doc) {
		return len(doc)
	}
	n := len(doc)
	for num := range numbersOf(doc) {
		if bytes.ContainsAny(num, "eE") {
			n += numericLength(string(num)) - len(num)
			if n > MaxRenderedSize {
				return MaxRenderedSize
			}
		}
	}
	return n
}

// mayHaveExponent reports whether doc holds a digit followed by e or E,
// as every exponent of a JSON number is (a string may hold such a pair
// too).
func mayHaveExponent(doc []byte) bool {
	for i := 1; i < len(doc); i++ {
		if doc[i]|0x20 == 'e' && '0' <= doc[i-1] && doc[i-1] <= '9' {
			return true
		}
	}
	return false
}

// numericLength is the length of num, a JSON number that Number accepts,
// as PostgreSQL's numeric prints it: without an exponent, with every digit
// before the point and as many after it as written (less the exponent),
// and a sign only when it is not zero.
func numericLength(num string) int {
	neg := strings.HasPrefix(num, "-")
	n := strings.TrimPrefix(num, "-")
	mantissa, exp := n, 0
	if k := strings.IndexAny(n, "eE"); k >= 0 {
		mantissa = n[:k]
		e, err := strconv.Atoi(strings.TrimPrefix(n[k+1:], "+"))
		if err != nil {
			return len(num) // beyond numeric's range, which Number refuses
		}
		exp = e
	}
	intPart, frac, _ := strings.Cut(mantissa, ".")
	digits := intPart + frac
	first := len(digits) - len(strings.TrimLeft(digits, "0")) // index of the first significant digit
	size := 1                                                 // digits before the point: "0" for a zero, or for no digit there
	if first < len(digits) {
		size = max(len(intPart)+exp-first, 1)
	}
	if scale := len(frac) - exp; scale > 0 {
		size += 1 + scale
	}
	if neg && first < len(digits) { // numeric has no negative zero
		size++
	}
	return size
}
