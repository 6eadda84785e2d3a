package canonjson

import (
	"math"
	"math/big"
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
	if p.exact {
		p.dst = appendExactNumber(p.dst, src[start:i])
	} else {
		p.dst = appendNumber(p.dst, f)
	}
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
// what RFC 8785 section 3.2.2.3 requires: its shortest digits in the
// notation of appendDecimal. Zero, including −0, is written as 0.
func appendNumber(dst []byte, f float64) []byte {
	if f == 0 {
		return append(dst, '0')
	}
	if f < 0 {
		dst = append(dst, '-')
		f = -f
	}
	var buf [32]byte
	digits, n := shortest(buf[:0], f)
	return appendDecimal(dst, digits, n)
}

// shortest returns, appended to buf, the digits of the positive finite f
// that ECMAScript writes, and the exponent n such that f's shortest
// decimal is 0.digits × 10^n. strconv's shortest representation has the
// same digits ECMAScript asks for: the fewest that round-trip, and among
// those the closest; they never end in 0.
func shortest(buf []byte, f float64) (digits []byte, n int) {
	sci := strconv.AppendFloat(buf, f, 'e', -1, 64) // d[.ddd]e±xx
	digits = sci[:0]                                // in place: each digit moves left, if at all
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
	return digits, exp + 1
}

// appendDecimal appends the positive value 0.digits × 10^n, digits
// without leading or trailing zeros, in ECMAScript's notation of numbers
// (ECMA-262, Number::toString): with k digits,
//
//	k ≤ n ≤ 21     digits followed by n−k zeros     (123, 1e20 → 100000000000000000000)
//	0 < n ≤ 21     digits with a point after n      (4.5)
//	−6 < n ≤ 0     "0." then −n zeros then digits   (0.000001)
//	otherwise      d[.ddd]e±(n−1)                   (1e+21, 1.5e-7)
//
// Different values are written differently.
func appendDecimal(dst, digits []byte, n int) []byte {
	k := len(digits)
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
		dst = append(appendMantissa(dst, digits), 'e')
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

// appendMantissa appends d[.ddd], the digits of an exponent notation.
func appendMantissa(dst, digits []byte) []byte {
	dst = append(dst, digits[0])
	if len(digits) > 1 {
		dst = append(dst, '.')
		dst = append(dst, digits[1:]...)
	}
	return dst
}

// appendExactNumber appends the number whose RFC 8259 literal is lit, for
// AppendExact: its exact value, in appendDecimal's notation. For a literal
// whose value is its nearest double's shortest decimal, that is what
// appendNumber writes (the same digits, the same notation); for one whose
// value is not (9007199254740993, 1e-400, 1.00000000000000000001), it is a
// text no double's form is.
func appendExactNumber(dst, lit []byte) []byte {
	var buf [64]byte
	d := exactDecimal(buf[:0], lit)
	if len(d.digits) == 0 { // 0, -0, 0.0e5: zero, as RFC 8785 writes it
		return append(dst, '0')
	}
	if d.neg {
		dst = append(dst, '-')
	}
	if n, small := d.exponent(); small {
		return appendDecimal(dst, d.digits, n)
	}
	// An exponent of more than 15 digits: only a value that underflows gets
	// here (one that overflows was refused), written as appendDecimal's
	// last case.
	e := new(big.Int)
	e.SetString(string(d.exp), 10)
	if d.expNeg {
		e.Neg(e)
	}
	e.Add(e, big.NewInt(int64(d.shift-1))) // n−1
	dst = append(appendMantissa(dst, d.digits), 'e')
	if e.Sign() >= 0 {
		dst = append(dst, '+')
	}
	return e.Append(dst, 10)
}

// decimal is the exact value of a number literal, (−1)^neg × 0.digits ×
// 10^n, n = ±exp + shift (see exponent); digits has no leading or
// trailing zeros, and is empty for zero.
type decimal struct {
	neg    bool
	digits []byte
	// exp is the literal's exponent (digits without leading zeros, or
	// none), expNeg its sign.
	exp    []byte
	expNeg bool
	shift  int
}

// exactDecimal returns the exact value of the number literal lit (valid
// RFC 8259 grammar), its digits appended to buf.
func exactDecimal(buf, lit []byte) decimal {
	var d decimal
	i := 0
	if lit[0] == '-' {
		d.neg = true
		i++
	}
	j := digitsEnd(lit, i)
	all := append(buf, lit[i:j]...)
	frac := 0
	if j < len(lit) && lit[j] == '.' {
		k := digitsEnd(lit, j+1)
		all = append(all, lit[j+1:k]...)
		frac = k - j - 1
		j = k
	}
	if j < len(lit) { // e or E
		j++
		if lit[j] == '+' || lit[j] == '-' {
			d.expNeg = lit[j] == '-'
			j++
		}
		for j < len(lit)-1 && lit[j] == '0' {
			j++
		}
		d.exp = lit[j:]
	}
	lead := 0
	for lead < len(all) && all[lead] == '0' {
		lead++
	}
	all = all[lead:]
	if len(all) == 0 {
		return d
	}
	trail := 0
	for all[len(all)-1-trail] == '0' {
		trail++
	}
	d.digits = all[:len(all)-trail]
	// lit = all × 10^(±exp − frac) = digits × 10^(±exp − frac + trail)
	// = 0.digits × 10^(±exp − frac + trail + len(digits)).
	d.shift = trail + len(d.digits) - frac
	return d
}

// exponent returns d's n, and whether it is small enough to be computed
// (the literal's exponent has at most 15 digits; n then fits easily).
func (d decimal) exponent() (int, bool) {
	if len(d.exp) > 15 {
		return 0, false
	}
	e := 0
	for _, c := range d.exp {
		e = e*10 + int(c-'0')
	}
	if d.expNeg {
		e = -e
	}
	return e + d.shift, true
}
