package canonjson

import (
	"strconv"
	"unicode/utf8"
)

// verbatim[c] reports whether the ASCII byte c stands for itself both in a
// JSON string and in its canonical form: it is not a quote, a backslash or
// a control character. Bytes from 0x80 up are false, as they may start
// invalid UTF-8.
var verbatim = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// validPlainEnd returns the index of the first byte at or after i that
// cannot be copied verbatim from a JSON string in src to its canonical
// form: a quote, a backslash, a control character, or a byte that does not
// start a valid UTF-8 sequence. It returns len(src) if there is none.
//
// This is where the input's UTF-8 is checked: every string byte passes
// through here, and no other part of a valid JSON text may hold non-ASCII
// bytes. Runes are decoded from the same boundaries as firstInvalidUTF8
// uses, so the first invalid byte found is the one it would report.
func validPlainEnd(src []byte, i int) int {
	i = asciiEnd(src, i)
	if i == len(src) || src[i] < utf8.RuneSelf {
		return i
	}
	return validUTF8PlainEnd(src, i)
}

// validUTF8PlainEnd is validPlainEnd for text that does not start with
// ASCII: callers that run asciiEnd inlined call it only when that stops
// at a non-ASCII byte.
func validUTF8PlainEnd(src []byte, i int) int {
	for i < len(src) {
		c := src[i]
		if verbatim[c] {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			return i
		}
		r, n := utf8.DecodeRune(src[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return i
}

// asciiEnd returns the index of the first byte at or after i that is not
// verbatim, or len(src). Callers that scan every name and string run it
// first, inlined, and call validPlainEnd only if it stops at non-ASCII.
func asciiEnd(src []byte, i int) int {
	for i < len(src) && verbatim[src[i]] {
		i++
	}
	return i
}

// plainEnd is validPlainEnd for text known to be valid UTF-8: it returns
// the index of the first quote, backslash or control character at or after
// i, or len(s) if there is none.
func plainEnd(s []byte, i int) int {
	for i < len(s) {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' {
			return i
		}
		i++
	}
	return i
}

// escapedString parses the string starting at src[i], which is not
// canonical as written, produces its canonical form and returns the
// position after it. Strings without escapes are handled by parse.
func (p *parser) escapedString(i int) (int, error) {
	mark := len(p.names)
	names, next, err := p.unquote(p.names, i)
	if err != nil {
		return i, err
	}
	p.flush(i, next)
	p.dst = appendString(p.dst, names[mark:])
	p.names = names[:mark]
	return next, nil
}

// unquote parses the string starting at src[i] (an opening quote), appends
// its unescaped content to buf as UTF-8 and returns the position after the
// closing quote.
func (p *parser) unquote(buf []byte, i int) ([]byte, int, error) {
	src := p.src
	i++
	for {
		end := validPlainEnd(src, i)
		buf = append(buf, src[i:end]...)
		i = end
		if i >= len(src) {
			return buf, i, p.eof()
		}
		switch c := src[i]; {
		case c == '"':
			return buf, i + 1, nil
		case c < 0x20:
			return buf, i, p.syntax(i, "(unescaped control character "+strconv.QuoteRune(rune(c))+" in string)")
		case c >= utf8.RuneSelf:
			return buf, i, &Error{Offset: i, Err: ErrInvalidUTF8}
		}
		// A backslash.
		if i+1 >= len(src) {
			return buf, i, p.eof()
		}
		switch e := src[i+1]; e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, n, err := p.unicodeEscape(i)
			if err != nil {
				return buf, i, err
			}
			buf = utf8.AppendRune(buf, r)
			i += n
			continue
		default:
			return buf, i, p.syntax(i, "(invalid escape "+quoteInput(src[i:i+2])+" in string)")
		}
		i += 2
	}
}

// unicodeEscape decodes the \uXXXX escape at src[i], combining a surrogate
// pair written as two escapes into one code point. It returns the code
// point and the number of input bytes used (6 or 12).
func (p *parser) unicodeEscape(i int) (rune, int, error) {
	r, err := p.hex4(i)
	if err != nil {
		return 0, 0, err
	}
	switch {
	case r < 0xD800 || r > 0xDFFF:
		return r, 6, nil
	case r >= 0xDC00:
		return 0, 0, p.loneSurrogate(i)
	}
	// A high surrogate must be followed at once by a low one.
	j := i + 6
	if j+1 >= len(p.src) || p.src[j] != '\\' || p.src[j+1] != 'u' {
		return 0, 0, p.loneSurrogate(i)
	}
	lo, err := p.hex4(j)
	if err != nil || lo < 0xDC00 || lo > 0xDFFF {
		return 0, 0, p.loneSurrogate(i)
	}
	return 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00), 12, nil
}

// hex4 decodes the four hex digits of the \u escape at src[i].
func (p *parser) hex4(i int) (rune, error) {
	var r rune
	for k := i + 2; k < i+6; k++ {
		if k >= len(p.src) {
			return 0, p.eof()
		}
		var d byte
		switch c := p.src[k]; {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, p.syntax(i, "(invalid escape "+quoteInput(p.src[i:k+1])+" in string)")
		}
		r = r<<4 | rune(d)
	}
	return r, nil
}

// loneSurrogate reports the unpaired surrogate escape at src[i].
func (p *parser) loneSurrogate(i int) error {
	return &Error{Offset: i, Err: ErrLoneSurrogate, detail: string(p.src[i : i+6])}
}

// appendString appends s, which is valid UTF-8, to dst as a canonical JSON
// string (RFC 8785 section 3.2.2.2): quote, backslash and the control
// characters with short escapes are written as \" \\ \b \f \n \r \t, other
// control characters as \u00xx with lowercase hex, and everything else,
// including U+007F and U+2028, as literal UTF-8.
func appendString(dst, s []byte) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		end := plainEnd(s, i)
		dst = append(dst, s[i:end]...)
		if end >= len(s) {
			break
		}
		c := s[end]
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
		}
		i = end + 1
	}
	return append(dst, '"')
}

// hexDigits are the lowercase hex digits RFC 8785 prescribes for \u escapes.
const hexDigits = "0123456789abcdef"
