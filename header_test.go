package idem_test

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/idemgo/idem"
)

var httpNS = idem.MustNamespace("http")

func TestParseKey(t *testing.T) {
	k255 := strings.Repeat("k", 255)
	for _, tc := range []struct {
		name  string
		in    string
		want  string
		error error
	}{
		{"raw token", "k1", "k1", nil},
		{"sf-string", `"k1"`, "k1", nil},
		{"raw uuid", "8e03978e-40d5-43e8-bc93-6894a57f9324", "8e03978e-40d5-43e8-bc93-6894a57f9324", nil},
		{"trimmed raw", " \tk1 \t", "k1", nil},
		{"trimmed sf-string", `  "k1"  `, "k1", nil},
		{"sf-string escapes", `"a\"b\\c"`, `a"b\c`, nil},
		{"sf-string with comma", `"a,b"`, "a,b", nil},
		{"sf-string with space inside", `"a b"`, "a b", nil},
		{"raw with space inside", "a b", "a b", nil},
		{"case kept", "AbC", "AbC", nil},
		{"255 bytes raw", k255, k255, nil},
		{"255 bytes sf-string", `"` + k255 + `"`, k255, nil},
		{"raw utf-8", "clé-1", "clé-1", nil},
		{"empty", "", "", idem.ErrKeyEmpty},
		{"blank", "  \t ", "", idem.ErrKeyEmpty},
		{"empty sf-string", `""`, "", idem.ErrKeyEmpty},
		{"blank sf-string", `"   "`, "", idem.ErrKeyEmpty},
		{"256 bytes", k255 + "k", "", idem.ErrKeyTooLong},
		{"256 bytes sf-string", `"` + k255 + `k"`, "", idem.ErrKeyTooLong},
		{"control character", "a\x01b", "", idem.ErrKeyControl},
		{"newline", "a\nb", "", idem.ErrKeyControl},
		{"DEL", "a\x7fb", "", idem.ErrKeyControl},
		{"control in sf-string", "\"a\x01b\"", "", idem.ErrKeyControl},
		{"unterminated sf-string", `"abc`, "", idem.ErrKeyMalformed},
		{"bad escape", `"a\nb"`, "", idem.ErrKeyMalformed},
		{"escape at end", `"abc\`, "", idem.ErrKeyMalformed},
		{"trailing data", `"abc"x`, "", idem.ErrKeyMalformed},
		{"parameters", `"abc";a=1`, "", idem.ErrKeyMalformed},
		{"non-ASCII in sf-string", `"clé"`, "", idem.ErrKeyMalformed},
		{"invalid utf-8 raw", "a\xffb", "", idem.ErrKeyMalformed},
		{"two raw values folded", "k1, k2", "", idem.ErrKeyMultiple},
		{"two sf-strings folded", `"k1", "k2"`, "", idem.ErrKeyMultiple},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := idem.ParseKey(httpNS, tc.in)
			if tc.error != nil {
				if !errors.Is(err, tc.error) || !errors.Is(err, idem.ErrInvalidKey) {
					t.Fatalf("ParseKey(%q) = %q, %v; want %v (and ErrInvalidKey)", tc.in, k.Value(), err, tc.error)
				}
				var ke *idem.KeyError
				if !errors.As(err, &ke) || ke.Detail == "" {
					t.Errorf("error %v is not a *KeyError with a detail", err)
				}
				return
			}
			if err != nil || k.Value() != tc.want || k.Namespace() != httpNS {
				t.Fatalf("ParseKey(%q) = %q, %v; want %q", tc.in, k.Value(), err, tc.want)
			}
		})
	}
}

func TestParseKeyRawAndQuotedAreOneKey(t *testing.T) {
	raw, err := idem.ParseKey(httpNS, "k1")
	if err != nil {
		t.Fatal(err)
	}
	quoted, err := idem.ParseKey(httpNS, `"k1"`)
	if err != nil {
		t.Fatal(err)
	}
	if raw != quoted {
		t.Errorf("raw %v and sf-string %v differ", raw, quoted)
	}
	upper, _ := idem.ParseKey(httpNS, "K1")
	if upper == raw {
		t.Error("keys are not case-sensitive")
	}
}

func TestParseHeader(t *testing.T) {
	if _, err := idem.ParseHeader(httpNS, nil); !errors.Is(err, idem.ErrKeyMissing) || errors.Is(err, idem.ErrInvalidKey) {
		t.Errorf("no header: %v, want ErrKeyMissing (not ErrInvalidKey)", err)
	}
	if _, err := idem.ParseHeader(httpNS, []string{"a", "b"}); !errors.Is(err, idem.ErrKeyMultiple) {
		t.Errorf("two header lines: %v, want ErrKeyMultiple", err)
	}
	k, err := idem.ParseHeader(httpNS, []string{`"k1"`})
	if err != nil || k.Value() != "k1" {
		t.Errorf("one header line: %v, %v", k, err)
	}
	if _, err := idem.ParseKey(idem.Namespace("Bad"), "k1"); !errors.Is(err, idem.ErrInvalidNamespace) {
		t.Errorf("bad namespace: %v, want ErrInvalidNamespace", err)
	}
}

// FuzzParseKey checks that the parser never panics, that accepted keys obey
// the key rules, and that an accepted key re-quoted as an sf-string (when
// ASCII) parses to the same key.
func FuzzParseKey(f *testing.F) {
	for _, s := range []string{"k1", `"k1"`, `"a\"b"`, "", " ", `"`, `"\`, "a,b", `"a";p=1`, "\x00", "é", strings.Repeat("x", 256)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		k, err := idem.ParseKey(httpNS, in)
		if err != nil {
			if !errors.Is(err, idem.ErrInvalidKey) {
				t.Fatalf("error %v is not ErrInvalidKey", err)
			}
			return
		}
		v := k.Value()
		if len(v) == 0 || len(v) > idem.MaxKeyLen || !utf8.ValidString(v) {
			t.Fatalf("accepted key %q breaks the rules", v)
		}
		for _, r := range v {
			if r < 0x20 || r == 0x7f {
				t.Fatalf("accepted key %q has a control character", v)
			}
		}
		ascii := true
		for i := 0; i < len(v); i++ {
			if v[i] > 0x7e {
				ascii = false
			}
		}
		if ascii {
			q := `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(v) + `"`
			k2, err := idem.ParseKey(httpNS, q)
			if err != nil || k2 != k {
				t.Fatalf("sf-string form %q of %q parses to %q, %v", q, v, k2.Value(), err)
			}
		}
	})
}
