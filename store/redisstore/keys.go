package redisstore

import (
	"strconv"
	"strings"

	"github.com/idemgo/idem"
)

// recordKey returns the Redis key of the record of k:
//
//	<prefix><namespace>:<n>:<scope>:<value>
//
// where scope and value are escaped by escapePart and n is the length in
// bytes of the escaped scope (0 when k has no scope). The encoding is
// injective: a namespace holds no ':', so the first ':' after the prefix
// ends it; n says where the scope ends, whatever bytes it holds; the value is
// the rest. Escaping keeps '{' and '}' of callers' scopes and values out of
// the key, so that no caller picks the Redis Cluster hash slot of a record
// with a hash tag.
func recordKey(prefix string, k idem.Key) string {
	var b strings.Builder
	scope, value := k.Scope(), k.Value()
	b.Grow(len(prefix) + len(k.Namespace()) + len(scope) + len(value) + 8)
	b.WriteString(prefix)
	b.WriteString(string(k.Namespace()))
	b.WriteByte(':')
	b.WriteString(strconv.Itoa(escapedLen(scope)))
	b.WriteByte(':')
	escapePart(&b, scope)
	b.WriteByte(':')
	escapePart(&b, value)
	return b.String()
}

// needsEscape reports whether c is written as %XX in a key part.
func needsEscape(c byte) bool { return c == '%' || c == '{' || c == '}' }

// escapedLen returns the length of s once escaped.
func escapedLen(s string) int {
	n := len(s)
	for i := 0; i < len(s); i++ {
		if needsEscape(s[i]) {
			n += 2
		}
	}
	return n
}

// escapePart writes s to b with '%', '{' and '}' percent-encoded (%25, %7B,
// %7D). Escaping '%' itself keeps the encoding injective.
func escapePart(b *strings.Builder, s string) {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if needsEscape(c) {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xF])
			continue
		}
		b.WriteByte(c)
	}
}

// namespacePattern returns the SCAN MATCH pattern of every record key of
// namespace ns: the prefix, with glob characters escaped, then "<ns>:*".
// A namespace holds no ':', so no other namespace's keys match.
func namespacePattern(prefix string, ns idem.Namespace) string {
	var b strings.Builder
	for i := 0; i < len(prefix); i++ {
		switch c := prefix[i]; c {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteString(string(ns))
	b.WriteString(":*")
	return b.String()
}
