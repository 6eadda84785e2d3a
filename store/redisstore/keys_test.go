package redisstore

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/idemgo/idem"
)

func testKey(t testing.TB, ns, scope, value string) idem.Key {
	t.Helper()
	k, err := idem.ParseKey(idem.Namespace(ns), value)
	if err != nil {
		t.Fatal(err)
	}
	if k, err = k.WithScope(scope); err != nil {
		t.Fatal(err)
	}
	return k
}

func TestRecordKeyLayout(t *testing.T) {
	for _, c := range []struct {
		name, prefix, ns, scope, value, want string
	}{
		{"unscoped", "idem:", "orders", "", "order-1", "idem:orders:0::order-1"},
		{"scoped", "idem:", "api", "caller-a", "order-1", "idem:api:8:caller-a:order-1"},
		{"colons", "idem:", "api", "a:b", "c:d", "idem:api:3:a:b:c:d"},
		{"hash tag in value", "idem:", "api", "", "x{tag}y", "idem:api:0::x%7Btag%7Dy"},
		{"hash tag in scope", "idem:", "api", "{t}", "v", "idem:api:7:%7Bt%7D:v"},
		{"percent", "idem:", "api", "", "100%", "idem:api:0::100%25"},
		{"prefix kept as is", "{app}:", "api", "", "v", "{app}:api:0::v"},
		{"utf-8", "p/", "n", "é", "ü", "p/n:2:é:ü"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := recordKey(c.prefix, testKey(t, c.ns, c.scope, c.value)); got != c.want {
				t.Errorf("recordKey = %q, want %q", got, c.want)
			}
		})
	}
}

// decodeRecordKey inverts recordKey for a known prefix: that it can is
// what makes the encoding injective.
func decodeRecordKey(prefix, key string) (ns, scope, value string, err error) {
	rest, ok := strings.CutPrefix(key, prefix)
	if !ok {
		return "", "", "", fmt.Errorf("no prefix")
	}
	ns, rest, ok = strings.Cut(rest, ":")
	if !ok {
		return "", "", "", fmt.Errorf("no namespace")
	}
	nText, rest, ok := strings.Cut(rest, ":")
	if !ok {
		return "", "", "", fmt.Errorf("no scope length")
	}
	n, err := strconv.Atoi(nText)
	if err != nil || n > len(rest) || len(rest) < n+1 || rest[n] != ':' {
		return "", "", "", fmt.Errorf("bad scope length %q", nText)
	}
	if scope, err = unescapePart(rest[:n]); err != nil {
		return "", "", "", err
	}
	if value, err = unescapePart(rest[n+1:]); err != nil {
		return "", "", "", err
	}
	return ns, scope, value, nil
}

func unescapePart(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '{' || c == '}':
			return "", fmt.Errorf("unescaped %q", c)
		case c != '%':
			b.WriteByte(c)
		case i+2 < len(s):
			n, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
			if err != nil || !needsEscape(byte(n)) {
				return "", fmt.Errorf("bad escape %q", s[i:i+3])
			}
			b.WriteByte(byte(n))
			i += 2
		default:
			return "", fmt.Errorf("truncated escape")
		}
	}
	return b.String(), nil
}

func TestRecordKeyInjective(t *testing.T) {
	// Pairs that naive encodings (joining with ':', or escaping only some
	// characters) map to one key.
	parts := []string{"", "a", "a:", ":a", "a:b", "0:", "1:a", "%", "%25", "{", "%7B", "}", "a}b{", "::", "3:a:b"}
	seen := map[string][2]string{}
	for _, scope := range parts {
		for _, value := range parts {
			if value == "" || strings.TrimSpace(value) != value || strings.HasPrefix(value, `"`) {
				continue
			}
			k := recordKey("idem:", testKey(t, "ns", scope, value))
			if prev, dup := seen[k]; dup {
				t.Fatalf("(%q, %q) and (%q, %q) share the key %q", prev[0], prev[1], scope, value, k)
			}
			seen[k] = [2]string{scope, value}
			if strings.ContainsAny(strings.TrimPrefix(k, "idem:"), "{}") {
				t.Errorf("key %q holds a brace a caller chose", k)
			}
		}
	}
}

func FuzzRecordKey(f *testing.F) {
	f.Add("orders", "", "order-1")
	f.Add("api", "a:b", "c{d}e")
	f.Add("n", "%7B", "%")
	f.Fuzz(func(t *testing.T, ns, scope, value string) {
		k, err := idem.ParseKey(idem.Namespace(ns), value)
		if err != nil {
			return
		}
		if k, err = k.WithScope(scope); err != nil {
			return
		}
		key := recordKey("idem:", k)
		gotNS, gotScope, gotValue, err := decodeRecordKey("idem:", key)
		if err != nil {
			t.Fatalf("decode %q: %v", key, err)
		}
		if gotNS != string(k.Namespace()) || gotScope != k.Scope() || gotValue != k.Value() {
			t.Fatalf("%q decodes to (%q, %q, %q), want (%q, %q, %q)", key, gotNS, gotScope, gotValue, k.Namespace(), k.Scope(), k.Value())
		}
	})
}

func TestNamespacePattern(t *testing.T) {
	for _, c := range []struct{ prefix, want string }{
		{"idem:", "idem:orders:*"},
		{"a*b?[c]\\:", `a\*b\?\[c\]\\:orders:*`},
		{"{app}:", "{app}:orders:*"},
	} {
		if got := namespacePattern(c.prefix, "orders"); got != c.want {
			t.Errorf("namespacePattern(%q) = %q, want %q", c.prefix, got, c.want)
		}
	}
}
