package canonjson

import (
	"math"
	"strconv"
)

// number parses the number at src[start], checks the RFC 8259 grammar
//
//	-? ( 0 | [1-9][0-9]* ) ( . [0-9]+ )? ( [eE] [+-]? [0-9]+ )?
//
// converts it to the nearest IEEE-754 binary64 value, produces that value
// in ECMAScript form and returns the position after the number.
func (p *parser) number(start int) (int, error) {
	src := p.src
	i := start
	neg := 0
	if src[i] == '-' {
		neg = 1
		i++
	}
	switch {
	case i >= len(src):
		return i, p.eof()
	case src[i] == '0':
		i++
	case isDigit(src[i]):
		i = digitsEnd(src, i)
	default:
		return i, p.unexpected(i, "in number")
	}
	fraction, exponent := false, false
	if i < len(src) && src[i] == '.' {
		fraction = true
		i++
		if i >= len(src) {
			return i, p.eof()
		}
		if !isDigit(src[i]) {
			return i, p.unexpected(i, "after decimal point")
		}
		i = digitsEnd(src, i)
	}
	if i < len(src) && (src[i] == 'e' || src[i] == 'E') {
		exponent = true
		i++
		if i < len(src) && (src[i] == '+' || src[i] == '-') {
			i++
		}
		if i >= len(src) {
			return i, p.eof()
		}
		if !isDigit(src[i]) {
			return i, p.unexpected(i, "in exponent")
		}
		i = digitsEnd(src, i)
	}
	// Integers of up to 15 digits are exact doubles whose ECMAScript form
	// is the literal itself, so they stay in the pending input; only -0
	// must be written as 0.
	if !fraction && !exponent && i-start-neg <= 15 {
		if neg == 1 && src[start+1] == '0' {
			p.flush(start, i)
			p.dst = append(p.dst, '0')
		}
		return i, nil
	}
	// The grammar above is stricter than ParseFloat's, so the only error
	// left is overflow; underflow quietly yields ±0, as in ECMAScript.
	f, err := strconv.ParseFloat(string(src[start:i]), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return i, &Error{Offset: start, Err: ErrNumberRange, detail: quoteInput(src[start:i])}
	}
	p.flush(start, i)
	p.dst = appendNumber(p.dst, f)
	return i, nil
}

// shortIntegerEnd returns the end of the number at src[i] if it is a
// positive integer of up to 15 digits without a leading zero, which is
// canonical as written (see number), and i otherwise. It spares the
// commonest numbers a call to number.
func shortIntegerEnd(src []byte, i int) int {
	if src[i]-'1' > 8 { // not 1 to 9
		return i
	}
	j := digitsEnd(src, i+1)
	if j-i > 15 || j < len(src) && (src[j] == '.' || src[j] == 'e' || src[j] == 'E') {
		return i
	}
	return j
}

// digitsEnd returns the index of the first non-digit at or after i.
func digitsEnd(src []byte, i int) int {
	for i < len(src) && isDigit(src[i]) {
		i++
	}
	return i
}

// appendNumber appends the finite value f as ECMAScript's
// Number.prototype.toString writes it (ECMA-262, Number::toString), which is
// what RFC 8785 section 3.2.2.3 requires.
//
// With the shortest digit string s of k digits and the exponent n such that
// f = 0.s × 10^n:
//
//	k ≤ n ≤ 21     s followed by n−k zeros          (123, 1e20 → 100000000000000000000)
//	0 < n ≤ 21     s with a point after n digits    (4.5)
//	−6 < n ≤ 0     "0." then −n zeros then s        (0.000001)
//	otherwise      d[.ddd]e±(n−1)                   (1e+21, 1.5e-7)
//
// Zero, including −0, is written as 0.
func appendNumber(dst []byte, f float64) []byte {
	if f == 0 {
		return append(dst, '0')
	}
	if f < 0 {
		dst = append(dst, '-')
		f = -f
	}
	// strconv's shortest representation has the same digits ECMAScript
	// asks for: the fewest that round-trip, and among those the closest.
	var buf [32]byte
	sci := strconv.AppendFloat(buf[:0], f, 'e', -1, 64) // d[.ddd]e±xx
	var digs [24]byte
	digits := digs[:0]
	i := 0
	for ; sci[i] != 'e'; i++ {
		if sci[i] != '.' {
			digits = append(digits, sci[i])
		}
	}
	exp := 0
	neg := sci[i+1] == '-'
	for _, c := range sci[i+2:] {
		exp = exp*10 + int(c-'0')
	}
	if neg {
		exp = -exp
	}
	k, n := len(digits), exp+1

	switch {
	case k <= n && n <= 21:
		dst = append(dst, digits...)
		for range n - k {
			dst = append(dst, '0')
		}
	case 0 < n && n <= 21:
		dst = append(dst, digits[:n]...)
		dst = append(dst, '.')
		dst = append(dst, digits[n:]...)
	case -6 < n && n <= 0:
		dst = append(dst, '0', '.')
		for range -n {
			dst = append(dst, '0')
		}
		dst = append(dst, digits...)
	default:
		dst = append(dst, digits[0])
		if k > 1 {
			dst = append(dst, '.')
			dst = append(dst, digits[1:]...)
		}
		dst = append(dst, 'e')
		if n-1 < 0 {
			dst = append(dst, '-')
			dst = strconv.AppendInt(dst, int64(1-n), 10)
		} else {
			dst = append(dst, '+')
			dst = strconv.AppendInt(dst, int64(n-1), 10)
		}
	}
	return dst
}
