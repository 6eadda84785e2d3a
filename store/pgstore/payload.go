package pgstore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/idemgo/idem"
)

// The check below runs after idem.CheckPayload (size, JSON syntax, UTF-8)
// and before anything is sent, so that PostgreSQL never rejects a payload
// halfway through a caller's transaction (which would abort it). It covers
// what PostgreSQL's jsonb refuses in JSON that CheckPayload accepts; the
// json column type (result_payload) takes every document CheckPayload
// accepts. The only remaining refusals, numbers beyond the range of
// JSONB's numeric, are still reported as idem.ErrInvalidPayload (see
// classify).

// checkJSONB rejects a document, valid JSON in valid UTF-8 (as
// idem.CheckPayload ensures), that the jsonb column type (request_payload)
// cannot hold: one with the escape \u0000 (jsonb stores strings as text,
// which has no NUL), or with a \u escape of a UTF-16 surrogate that is not
// part of a pair.
func checkJSONB(what string, b []byte) error {
	// In valid JSON a backslash only occurs inside strings, and always
	// starts an escape, so escapes can be found without tracking where
	// strings start and end.
	for i := 0; ; {
		j := bytes.IndexByte(b[i:], '\\')
		if j < 0 {
			return nil
		}
		i += j + 1 // the escaped character
		if b[i] != 'u' {
			i++
			continue
		}
		r := hex4(b[i+1 : i+5])
		i += 5
		switch {
		case r == 0:
			return fmt.Errorf(`%w: %s has the escape \u0000, which PostgreSQL's jsonb cannot store`, idem.ErrInvalidPayload, what)
		case 0xDC00 <= r && r <= 0xDFFF:
			return fmt.Errorf("%w: %s has a lone low surrogate escape, which PostgreSQL's jsonb rejects", idem.ErrInvalidPayload, what)
		case 0xD800 <= r && r <= 0xDBFF:
			if i+6 > len(b) || b[i] != '\\' || b[i+1] != 'u' {
				return fmt.Errorf("%w: %s has a lone high surrogate escape, which PostgreSQL's jsonb rejects", idem.ErrInvalidPayload, what)
			}
			if lo := hex4(b[i+2 : i+6]); lo < 0xDC00 || lo > 0xDFFF {
				return fmt.Errorf("%w: %s has a lone high surrogate escape, which PostgreSQL's jsonb rejects", idem.ErrInvalidPayload, what)
			}
			i += 6
		}
	}
}

// hex4 decodes the four hex digits of a \u escape (valid: the document
// passed json.Valid).
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

// encodeError encodes a StoredError for the error_payload column. NUL
// characters, which jsonb cannot store, are replaced with U+FFFD, as
// encoding/json already does with invalid UTF-8: a permanent failure must
// be recordable whatever its message says. The encoded size counts against
// maxPayload (*idem.PayloadTooLargeError, What "error").
func encodeError(se idem.StoredError, maxPayload int) ([]byte, error) {
	clean := func(s string) string { return strings.ReplaceAll(s, "\x00", "\uFFFD") }
	se.Class, se.Message, se.Cause = clean(se.Class), clean(se.Message), clean(se.Cause)
	b, err := json.Marshal(se)
	if err != nil {
		return nil, err // cannot happen: three strings
	}
	if len(b) > maxPayload {
		return nil, &idem.PayloadTooLargeError{What: "error", Size: len(b), Limit: maxPayload}
	}
	return b, nil
}

// decodeError decodes an error_payload column.
func decodeError(b []byte) (*idem.StoredError, error) {
	var se idem.StoredError
	if err := json.Unmarshal(b, &se); err != nil {
		return nil, err
	}
	return &se, nil
}
