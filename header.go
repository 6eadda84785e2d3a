package idem

import (
	"fmt"
	"strings"
)

// HeaderName is the canonical name of the HTTP header that carries keys.
const HeaderName = "Idempotency-Key"

// ParseHeader parses the values of an Idempotency-Key header, as found in
// http.Header[HeaderName], into a Key of namespace ns.
//
// No value at all gives ErrKeyMissing. More than one header line gives a
// *KeyError of kind ErrKeyMultiple. The single value is parsed by ParseKey.
func ParseHeader(ns Namespace, values []string) (Key, error) {
	switch len(values) {
	case 0:
		return Key{}, ErrKeyMissing
	case 1:
		return ParseKey(ns, values[0])
	default:
		return Key{}, &KeyError{Kind: ErrKeyMultiple, Detail: fmt.Sprintf("%d header lines, want one", len(values))}
	}
}

// ParseKey parses one Idempotency-Key header value into a Key of namespace
// ns. The value may be an RFC 8941 sf-string ("k1", the form the IETF
// draft specifies) or a raw token (k1, the form most clients send); both give
// the same key. Surrounding spaces and tabs are trimmed. Keys are
// case-sensitive.
//
// Errors are *KeyError values (errors.Is(err, ErrInvalidKey) holds):
// ErrKeyEmpty for an empty or blank value or sf-string,
// ErrKeyTooLong for more than 255 bytes, ErrKeyControl for control
// characters, ErrKeyMalformed for a malformed sf-string, invalid UTF-8 or
// sf-string parameters, and ErrKeyMultiple for a raw value containing a comma
// (which is what two header lines folded into one look like).
// An invalid namespace gives an error satisfying
// errors.Is(err, ErrInvalidNamespace).
func ParseKey(ns Namespace, value string) (Key, error) {
	v := strings.Trim(value, " \t")
	if v == "" {
		return Key{}, &KeyError{Kind: ErrKeyEmpty, Detail: "header value is empty"}
	}
	if v[0] != '"' {
		if strings.IndexByte(v, ',') >= 0 {
			return Key{}, &KeyError{Kind: ErrKeyMultiple, Detail: "raw key contains a comma (several values?); send one key, or quote it as an sf-string"}
		}
		return newKey(ns, v)
	}
	s, err := parseSFString(v)
	if err != nil {
		return Key{}, err
	}
	if strings.Trim(s, " \t") == "" {
		return Key{}, &KeyError{Kind: ErrKeyEmpty, Detail: "sf-string is empty or blank"}
	}
	return newKey(ns, s)
}

// parseSFString parses an RFC 8941 sf-string that makes up all of v.
func parseSFString(v string) (string, error) {
	var b strings.Builder
	for i := 1; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '\\':
			i++
			if i == len(v) {
				return "", &KeyError{Kind: ErrKeyMalformed, Detail: "sf-string ends inside an escape"}
			}
			if v[i] != '"' && v[i] != '\\' {
				return "", &KeyError{Kind: ErrKeyMalformed, Detail: fmt.Sprintf("sf-string has invalid escape at byte %d (only \\\" and \\\\ are allowed)", i)}
			}
			b.WriteByte(v[i])
		case c == '"':
			// v has no trailing whitespace (ParseKey trimmed it); what
			// follows the quote may start with some, as in `"k1" , "k2"`.
			if rest := strings.TrimLeft(v[i+1:], " \t"); rest != "" {
				if rest[0] == ';' {
					return "", &KeyError{Kind: ErrKeyMalformed, Detail: "sf-string parameters are not supported"}
				}
				if rest[0] == ',' {
					return "", &KeyError{Kind: ErrKeyMultiple, Detail: "several sf-string values in one header"}
				}
				return "", &KeyError{Kind: ErrKeyMalformed, Detail: fmt.Sprintf("unexpected data after the sf-string at byte %d", i+1)}
			}
			return b.String(), nil
		case c < 0x20 || c == 0x7f:
			return "", &KeyError{Kind: ErrKeyControl, Detail: fmt.Sprintf("sf-string has control character 0x%02x at byte %d", c, i)}
		case c > 0x7f:
			return "", &KeyError{Kind: ErrKeyMalformed, Detail: fmt.Sprintf("sf-string has non-ASCII byte 0x%02x at byte %d", c, i)}
		default:
			b.WriteByte(c)
		}
	}
	return "", &KeyError{Kind: ErrKeyMalformed, Detail: "sf-string has no closing quote"}
}
