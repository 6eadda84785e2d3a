package idem_test

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/idemgo/idem"
)

// keySeeds are the header values of TestParseKey and the edges of the
// grammar, the seed corpus of the key fuzz targets.
var keySeeds = []string{
	"k1", `"k1"`, "8e03978e-40d5-43e8-bc93-6894a57f9324", " \tk1 \t", `  "k1"  `, `"a\"b\\c"`, `"a,b"`, `"a b"`, "a b", "AbC",
	strings.Repeat("k", 255), `"` + strings.Repeat("k", 255) + `"`, strings.Repeat("k", 256), `"` + strings.Repeat("k", 256) + `"`,
	"clé-1", "", "  \t ", `""`, `"   "`, "a\x01b", "a\nb", "a\x7fb", "\"a\x01b\"", `"abc`, `"a\nb"`, `"abc\`, `"abc"x`,
	`"abc";a=1`, `"clé"`, "a\xffb", "k1, k2", `"k1", "k2"`, "\u0085", "a\u00a0b", "\v", `"\"`, `"a"  ,`, `"a"` + "\t;",
	`"\\"`, `"` + "\x7f" + `"`, "\"\xc3\xa9\"", "\xed\xa0\x80", "a\"b", `"`, `"\`, "é", "\x00",
}

// sfString matches an RFC 8941 sf-string making up all of its input.
var sfString = regexp.MustCompile(`^"((?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\["\\])*)"$`)

// keyVerdict is what the documentation of ParseKey says of value: the
// key value it gives, or the error kinds it may fail with (more than one
// when the value breaks several rules).
func keyVerdict(value string) (key string, kinds []error) {
	v := strings.Trim(value, " \t")
	if v == "" {
		return "", []error{idem.ErrKeyEmpty}
	}
	if v[0] == '"' {
		m := sfString.FindStringSubmatch(v)
		if m == nil {
			kinds = []error{idem.ErrKeyMalformed}
			if strings.ContainsAny(v, ",") {
				kinds = append(kinds, idem.ErrKeyMultiple)
			}
			if strings.IndexFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
				kinds = append(kinds, idem.ErrKeyControl)
			}
			return "", kinds
		}
		s := strings.NewReplacer(`\"`, `"`, `\\`, `\`).Replace(m[1])
		switch {
		case strings.Trim(s, " ") == "":
			return "", []error{idem.ErrKeyEmpty}
		case len(s) > idem.MaxKeyLen:
			return "", []error{idem.ErrKeyTooLong}
		}
		return s, nil
	}
	if strings.Contains(v, ",") {
		return "", []error{idem.ErrKeyMultiple}
	}
	if len(v) > idem.MaxKeyLen {
		return "", []error{idem.ErrKeyTooLong}
	}
	if !utf8.ValidString(v) {
		kinds = append(kinds, idem.ErrKeyMalformed)
	}
	if strings.IndexFunc(v, unicode.IsControl) >= 0 {
		kinds = append(kinds, idem.ErrKeyControl)
	}
	return v, kinds
}

// checkKeyError checks that err is a *KeyError with a detail, satisfying
// ErrInvalidKey, whose kind is one of kinds.
func checkKeyError(t *testing.T, in string, err error, kinds []error) {
	t.Helper()
	var ke *idem.KeyError
	if !errors.As(err, &ke) || ke.Detail == "" || !errors.Is(err, idem.ErrInvalidKey) {
		t.Fatalf("ParseKey(%q): error %v (%T) is not a *KeyError with a detail satisfying ErrInvalidKey", in, err, err)
	}
	for _, k := range kinds {
		if ke.Kind == k {
			return
		}
	}
	t.Fatalf("ParseKey(%q): error kind %v, want one of %v", in, ke.Kind, kinds)
}

// FuzzParseKeyDoc checks that ParseKey accepts exactly the values its
// documentation says it accepts, giving the value the documentation says
// (raw tokens as they are, sf-strings unescaped), and rejects the others
// with a *KeyError of the documented kind; and that an accepted key
// written back as a raw token or as an sf-string, where it can be, parses
// to the same key.
func FuzzParseKeyDoc(f *testing.F) {
	for _, s := range keySeeds {
		f.Add(s)
	}
	ns := idem.MustNamespace("fuzz")
	f.Fuzz(func(t *testing.T, in string) {
		k, err := idem.ParseKey(ns, in)
		want, kinds := keyVerdict(in)
		if kinds != nil {
			if err == nil {
				t.Fatalf("ParseKey(%q) = %q, want an error of kind %v", in, k.Value(), kinds)
			}
			checkKeyError(t, in, err, kinds)
			return
		}
		if err != nil {
			t.Fatalf("ParseKey(%q): %v, want %q", in, err, want)
		}
		if k.Value() != want || k.Namespace() != ns || k.Scope() != "" || k.IsZero() {
			t.Fatalf("ParseKey(%q) = %#v, want value %q in %s", in, k, want, ns)
		}
		if k.String() != "fuzz/"+want {
			t.Fatalf("String() = %q", k.String())
		}
		// Written back as a raw token.
		if v := k.Value(); v[0] != '"' && !strings.Contains(v, ",") && strings.Trim(v, " \t") == v {
			if k2, err := idem.ParseKey(ns, v); err != nil || k2 != k {
				t.Fatalf("raw form %q of %q parses to %#v, %v", v, in, k2, err)
			}
		}
		// Written back as an sf-string.
		if q := `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(k.Value()) + `"`; sfString.MatchString(q) {
			if k2, err := idem.ParseKey(ns, q); err != nil || k2 != k {
				t.Fatalf("sf-string form %q of %q parses to %#v, %v", q, in, k2, err)
			}
		}
	})
}

// FuzzParseHeader checks ParseHeader against its documentation: no value
// is ErrKeyMissing (which is not an invalid key), one value is what
// ParseKey makes of it, several are a *KeyError of kind ErrKeyMultiple.
func FuzzParseHeader(f *testing.F) {
	for i, s := range keySeeds {
		f.Add(uint8(i%4), s, keySeeds[(i+1)%len(keySeeds)])
	}
	ns := idem.MustNamespace("http")
	f.Fuzz(func(t *testing.T, n uint8, a, b string) {
		values := []string{a, b, a, b}[:n%5]
		k, err := idem.ParseHeader(ns, values)
		switch len(values) {
		case 0:
			if !errors.Is(err, idem.ErrKeyMissing) || errors.Is(err, idem.ErrInvalidKey) || !k.IsZero() {
				t.Fatalf("ParseHeader(none) = %#v, %v; want ErrKeyMissing alone", k, err)
			}
		case 1:
			k2, err2 := idem.ParseKey(ns, a)
			if k != k2 || (err == nil) != (err2 == nil) || err != nil && err.Error() != err2.Error() {
				t.Fatalf("ParseHeader(%q) = %#v, %v; ParseKey = %#v, %v", a, k, err, k2, err2)
			}
		default:
			var ke *idem.KeyError
			if !errors.As(err, &ke) || ke.Kind != idem.ErrKeyMultiple || !errors.Is(err, idem.ErrInvalidKey) || !k.IsZero() {
				t.Fatalf("ParseHeader(%d values) = %#v, %v; want ErrKeyMultiple", len(values), k, err)
			}
		}
	})
}

// FuzzNamespace checks that NewNamespace accepts exactly 1–64 bytes of
// a-z, 0-9, '-' and '_', returning the name unchanged, and rejects
// everything else with an error satisfying ErrInvalidNamespace; and that a
// key is only made in a valid namespace.
func FuzzNamespace(f *testing.F) {
	for _, s := range []string{"http", "a", "a-b_c9", "", "A", "a.b", "a b", "é", strings.Repeat("n", 64), strings.Repeat("n", 65), "-", "_", "\x00"} {
		f.Add(s)
	}
	valid := regexp.MustCompile(`^[a-z0-9_-]{1,64}$`)
	f.Fuzz(func(t *testing.T, s string) {
		ns, err := idem.NewNamespace(s)
		if valid.MatchString(s) {
			if err != nil || string(ns) != s {
				t.Fatalf("NewNamespace(%q) = %q, %v; want it accepted", s, ns, err)
			}
			return
		}
		if err == nil || !errors.Is(err, idem.ErrInvalidNamespace) || ns != "" {
			t.Fatalf("NewNamespace(%q) = %q, %v; want ErrInvalidNamespace", s, ns, err)
		}
		if _, err := idem.ParseKey(idem.Namespace(s), "k1"); !errors.Is(err, idem.ErrInvalidNamespace) {
			t.Fatalf("ParseKey in namespace %q: %v, want ErrInvalidNamespace", s, err)
		}
	})
}

// FuzzWithScope checks that WithScope accepts exactly scopes of at most
// 128 bytes of UTF-8 without control characters, keeping the key's value
// and namespace, and rejects the others with a *KeyError of the kind that
// says why.
func FuzzWithScope(f *testing.F) {
	for _, s := range []string{"", "tenant-1", "sha256:ab", "clé", "a\x00", "a\nb", "\xff", "\u0085", strings.Repeat("s", 128), strings.Repeat("s", 129)} {
		f.Add(s)
	}
	k, err := idem.ParseKey(idem.MustNamespace("http"), "k1")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, scope string) {
		var kinds []error
		if len(scope) > idem.MaxScopeLen {
			kinds = append(kinds, idem.ErrKeyTooLong)
		}
		if !utf8.ValidString(scope) {
			kinds = append(kinds, idem.ErrKeyMalformed)
		}
		if strings.IndexFunc(scope, unicode.IsControl) >= 0 {
			kinds = append(kinds, idem.ErrKeyControl)
		}
		s, err := k.WithScope(scope)
		if kinds != nil {
			if err == nil {
				t.Fatalf("WithScope(%q) accepted, want one of %v", scope, kinds)
			}
			checkKeyError(t, scope, err, kinds)
			return
		}
		if err != nil || s.Scope() != scope || s.Value() != k.Value() || s.Namespace() != k.Namespace() {
			t.Fatalf("WithScope(%q) = %#v, %v", scope, s, err)
		}
		if want := "http/" + scope + "/k1"; scope != "" && s.String() != want {
			t.Fatalf("String() = %q, want %q", s.String(), want)
		}
		if u, err := s.WithScope(""); err != nil || u != k {
			t.Fatalf("WithScope(\"\") = %#v, %v; want the unscoped key back", u, err)
		}
	})
}
