// Package pgstorable says whether PostgreSQL can store a value, so that a
// caller rejects what it would refuse before sending anything: a refusal
// halfway through a transaction aborts the whole transaction.
package pgstorable

import (
	"bytes"
	"errors"
	"iter"
	"strings"
	"time"
	"unicode/utf8"
)

// JSONB returns an error when b, valid JSON in valid UTF-8, holds what the
// jsonb type refuses: the escape \u0000 (jsonb keeps strings as text,
// which has no NUL), a \u escape of a UTF-16 surrogate that is not part
// of a pair, or a number beyond the numeric type's range (see Number). The
// json type takes every valid document.
func JSONB(b []byte) error {
	if err := escapes(b); err != nil {
		return err
	}
	return numbers(b)
}

// escapes checks the \u escapes of b for JSONB.
func escapes(b []byte) error {
	// In valid JSON a backslash only occurs inside strings, and always
	// starts an escape, so escapes can be found without tracking where
	// strings start and end.
	for i := 0; ; {
		j := bytes.IndexByte(b[i:], '\\')
		if j < 0 || i+j+1 >= len(b) {
			return nil
		}
		i += j + 1 // the escaped character
		if b[i] != 'u' || i+5 > len(b) {
			i++
			continue
		}
		r := hex4(b[i+1 : i+5])
		i += 5
		switch {
		case r == 0:
			return errors.New(`has the escape \u0000, which PostgreSQL's jsonb cannot store`)
		case 0xDC00 <= r && r <= 0xDFFF:
			return errors.New("has a lone low surrogate escape, which PostgreSQL's jsonb rejects")
		case 0xD800 <= r && r <= 0xDBFF:
			if i+6 > len(b) || b[i] != '\\' || b[i+1] != 'u' {
				return errors.New("has a lone high surrogate escape, which PostgreSQL's jsonb rejects")
			}
			if lo := hex4(b[i+2 : i+6]); lo < 0xDC00 || lo > 0xDFFF {
				return errors.New("has a lone high surrogate escape, which PostgreSQL's jsonb rejects")
			}
			i += 6
		}
	}
}

// numbers checks the numbers of b, valid JSON, with Number. A number can
// only be beyond the range with an exponent, or with more than 16383
// digits, so most documents are passed by a glance.
func numbers(b []byte) error {
	if len(b) <= maxScale && !bytes.ContainsAny(b, "eE") {
		return nil
	}
	for num := range numbersOf(b) {
		if err := Number(num); err != nil {
			return err
		}
	}
	return nil
}

// numbersOf yields the numbers of b, valid JSON, in order, skipping the
// strings.
func numbersOf(b []byte) iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		for i := 0; i < len(b); {
			switch c := b[i]; {
			case c == '"':
				i = stringEnd(b, i+1)
			case c == '-' || '0' <= c && c <= '9':
				j := i + 1
				for j < len(b) && numberByte(b[j]) {
					j++
				}
				if !yield(b[i:j]) {
					return
				}
				i = j
			default:
				i++
			}
		}
	}
}

// stringEnd returns the index after the closing quote of the string whose
// contents start at b[i].
func stringEnd(b []byte, i int) int {
	for {
		j := bytes.IndexAny(b[i:], `"\`)
		if j < 0 {
			return len(b)
		}
		i += j
		if b[i] == '"' {
			return i + 1
		}
		i += 2 // a backslash and the character it escapes
	}
}

func numberByte(c byte) bool {
	return '0' <= c && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'
}

// The limits of PostgreSQL's numeric type, which jsonb keeps numbers in:
// up to 131072 digits before the decimal point and 16383 after it.
const (
	maxIntDigits = 131072
	maxScale     = 16383
	// maxExponent is the magnitude from which PostgreSQL refuses an
	// exponent as it reads it ("value overflows numeric format"), whatever
	// the digits: INT_MAX/2.
	maxExponent = 1<<30 - 1
)

// Number returns an error when num, a JSON number, is beyond what jsonb
// stores: a non-zero value with more than 131072 digits before the
// decimal point, or more than 16383 digits after it as written (a zero
// value too: 0.0e-16383 has 16384). An exponent moves the point; one of
// 1073741823 or more either way is refused whatever the digits (0e1073741823
// too), as PostgreSQL refuses it.
func Number(num []byte) error {
	n := strings.TrimPrefix(string(num), "-")
	mantissa, exp := n, int64(0)
	if k := strings.IndexAny(n, "eE"); k >= 0 {
		mantissa = n[:k]
		e := strings.TrimPrefix(n[k+1:], "+")
		neg := strings.HasPrefix(e, "-")
		e = strings.TrimLeft(strings.TrimPrefix(e, "-"), "0")
		if len(e) > 10 { // far beyond every limit, and within int64
			e = "9999999999"
		}
		for _, c := range e {
			exp = exp*10 + int64(c-'0')
		}
		if exp >= maxExponent { // refused even for zero
			return errors.New("has a number with an exponent beyond what PostgreSQL's jsonb reads (±1073741822)")
		}
		if neg {
			exp = -exp
		}
	}
	intPart, frac, _ := strings.Cut(mantissa, ".")
	if int64(len(frac))-exp > maxScale {
		return errors.New("has a number with more digits after the decimal point than PostgreSQL's jsonb stores (16383)")
	}
	digits := intPart + frac
	lead := len(digits) - len(strings.TrimLeft(digits, "0"))
	if lead == len(digits) {
		return nil // zero
	}
	if int64(len(intPart)-lead)+exp > maxIntDigits {
		return errors.New("has a number with more digits before the decimal point than PostgreSQL's jsonb stores (131072)")
	}
	return nil
}

// hex4 decodes the four hex digits of a \u escape.
func hex4(b []byte) rune {
	var r rune
	for _, c := range b {
		r <<= 4
		switch {
		case '0' <= c && c <= '9':
			r |= rune(c - '0')
		case 'a' <= c && c <= 'f':
			r |= rune(c - 'a' + 10)
		case 'A' <= c && c <= 'F':
			r |= rune(c - 'A' + 10)
		}
	}
	return r
}

// Text returns an error when s cannot be stored in a text column (in a
// UTF-8 database): it is not valid UTF-8, or it holds a NUL character.
func Text(s string) error {
	if !utf8.ValidString(s) {
		return errors.New("is not valid UTF-8")
	}
	if strings.IndexByte(s, 0) >= 0 {
		return errors.New("holds a NUL character, which PostgreSQL's text cannot store")
	}
	return nil
}

// CleanText returns s as a text column can store it: each NUL character
// and each byte that is not part of valid UTF-8 replaced with U+FFFD, as
// encoding/json replaces the latter.
func CleanText(s string) string {
	if Text(s) == nil {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for _, r := range s { // an invalid byte comes as utf8.RuneError
		if r == 0 {
			r = utf8.RuneError
		}
		b.WriteRune(r)
	}
	return b.String()
}

// The range of PostgreSQL's timestamptz: 4714-11-24 BC (the year -4713 in
// Go's proleptic count) to 294276-12-31 AD, in UTC.
var (
	minTime = time.Date(-4713, time.November, 24, 0, 0, 0, 0, time.UTC)
	maxTime = time.Date(294277, time.January, 1, 0, 0, 0, 0, time.UTC)
)

// Time returns an error when t is outside the range of timestamptz.
func Time(t time.Time) error {
	if t.Before(minTime) || !t.Before(maxTime) {
		return errors.New("is outside the range of PostgreSQL's timestamptz (4714 BC to 294276 AD)")
	}
	return nil
}

// ClampTime returns t, or the first or last microsecond timestamptz holds
// when t is before or after its range. A comparison with a stored time
// gives the same answer with either, since no stored time lies outside
// the range; and t outside it would be refused by the server, or (far
// enough) overflow pgx's encoding into another time altogether.
func ClampTime(t time.Time) time.Time {
	switch {
	case t.Before(minTime):
		return minTime
	case !t.Before(maxTime):
		return maxTime.Add(-time.Microsecond)
	}
	return t
}
