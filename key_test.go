package idem_test

import (
	"errors"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/idemgo/idem"
)

func TestNamespace(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		ok   bool
	}{
		{"simple", "email-job", true},
		{"digits and underscore", "svc_2", true},
		{"max length", strings.Repeat("a", 64), true},
		{"empty", "", false},
		{"too long", strings.Repeat("a", 65), false},
		{"upper case", "Email", false},
		{"space", "a b", false},
		{"dot", "a.b", false},
		{"unicode", "é", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns, err := idem.NewNamespace(tc.in)
			if tc.ok != (err == nil) {
				t.Fatalf("NewNamespace(%q) = %q, %v; want ok=%v", tc.in, ns, err, tc.ok)
			}
			if err != nil && !errors.Is(err, idem.ErrInvalidNamespace) {
				t.Errorf("error %v is not ErrInvalidNamespace", err)
			}
		})
	}
}

func TestMustNamespacePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("MustNamespace(\"Bad\") did not panic")
		}
	}()
	idem.MustNamespace("Bad")
}

func TestKeyScope(t *testing.T) {
	ns := idem.MustNamespace("http")
	k, err := idem.ParseKey(ns, "k1")
	if err != nil {
		t.Fatal(err)
	}
	if k.Scope() != "" || k.String() != "http/k1" {
		t.Errorf("unscoped key = %q scope %q", k, k.Scope())
	}
	s, err := k.WithScope("caller-a")
	if err != nil {
		t.Fatal(err)
	}
	if s == k || s.Scope() != "caller-a" || s.Value() != "k1" || s.Namespace() != ns || s.String() != "http/caller-a/k1" {
		t.Errorf("scoped key = %q (%q, %q, %q)", s, s.Namespace(), s.Scope(), s.Value())
	}
	if u, _ := s.WithScope(""); u != k {
		t.Errorf("removing the scope gave %q, want %q", u, k)
	}
	for name, scope := range map[string]string{
		"too long": strings.Repeat("s", idem.MaxScopeLen+1),
		"control":  "a\x00b",
		"bad utf8": "a\xffb",
	} {
		if _, err := k.WithScope(scope); !errors.Is(err, idem.ErrInvalidKey) {
			t.Errorf("WithScope(%s) = %v, want ErrInvalidKey", name, err)
		}
	}
	if (idem.Key{}).IsZero() != true || k.IsZero() {
		t.Error("IsZero wrong")
	}
}

// TestWithScopeCharacters: the printable-ASCII fast path of the text check
// accepts and rejects exactly what the rune-by-rune check does, for every
// byte value and for multi-byte text.
func TestWithScopeCharacters(t *testing.T) {
	k, err := idem.ParseHeader("ns", []string{"key"})
	if err != nil {
		t.Fatal(err)
	}
	check := func(scope string) {
		t.Helper()
		_, err := k.WithScope(scope)
		want := utf8.ValidString(scope)
		for _, r := range scope {
			if unicode.IsControl(r) {
				want = false
			}
		}
		if (err == nil) != want {
			t.Errorf("WithScope(%q): err = %v, want accepted = %v", scope, err, want)
		}
		if err != nil && !errors.Is(err, idem.ErrInvalidKey) {
			t.Errorf("WithScope(%q): err = %v, not ErrInvalidKey", scope, err)
		}
	}
	for b := range 256 {
		check("scope-" + string([]byte{byte(b)}) + "-x")
	}
	for _, s := range []string{"", "0123456789abcdef0123456789abcdef", "tenant/é", "日本", "a\u0085b", "a\u200bb", "\xff\xfe", "ok\xc3"} {
		check(s)
	}
}

// TestNewKeyIsExact: NewKey keeps its value as given, where ParseKey reads
// a header (trims, unquotes, refuses commas); it checks the same limits.
func TestNewKeyIsExact(t *testing.T) {
	ns := idem.MustNamespace("msgs")
	for _, v := range []string{"abc", `"abc"`, " abc ", "a,b", `"a\"b"`, "é中", strings.Repeat("k", idem.MaxKeyLen)} {
		k, err := idem.NewKey(ns, v)
		if err != nil || k.Value() != v || k.Namespace() != ns || k.Scope() != "" {
			t.Errorf("NewKey(%q) = %v (value %q), %v; want the value as given", v, k, k.Value(), err)
		}
	}
	for v, kind := range map[string]error{
		"":                                    idem.ErrKeyEmpty,
		strings.Repeat("k", idem.MaxKeyLen+1): idem.ErrKeyTooLong,
		"a\tb":                                idem.ErrKeyControl,
		"a\x00":                               idem.ErrKeyControl,
		"caf\xe9":                             idem.ErrKeyMalformed,
	} {
		_, err := idem.NewKey(ns, v)
		var ke *idem.KeyError
		if !errors.Is(err, kind) || !errors.Is(err, idem.ErrInvalidKey) || !errors.As(err, &ke) {
			t.Errorf("NewKey(%q) = %v, want a *KeyError of %v", v, err, kind)
		}
	}
	if _, err := idem.NewKey("Bad NS", "k"); !errors.Is(err, idem.ErrInvalidNamespace) {
		t.Errorf("NewKey with an invalid namespace = %v", err)
	}
}
