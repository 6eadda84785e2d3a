// Package pgstorable says whether PostgreSQL can store a value, so that a
// caller rejects what it would refuse before sending anything: a refusal
// halfway through a transaction aborts the whole transaction.
package pgstorable

import (
	"bytes"
	"errors"
	"strings"
	"unicode/utf8"
)

// JSONB returns an error when b, valid JSON in valid UTF-8, holds what the
// jsonb type refuses: the escape \u0000 (jsonb keeps strings as text,
// which has no NUL), or a \u escape of a UTF-16 surrogate that is not part
// of a pair. The json type takes every valid document.
func JSONB(b []byte) error {
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
