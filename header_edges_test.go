package idem_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/idemgo/idem"
)

// TestParseKeyEdges pins the edges of the Idempotency-Key grammar: the
// 255-byte limit counts the key's bytes (after sf-string unescaping, and
// UTF-8 bytes rather than characters), C1 controls and tabs inside a key
// are control characters, text after a closing quote is refused, and a
// raw value is taken as it is (parameters are only recognised after an
// sf-string).
func TestParseKeyEdges(t *testing.T) {
	k254 := strings.Repeat("k", 254)
	e127 := strings.Repeat("é", 127) // 254 bytes
	for _, tc := range []struct {
		name  string
		in    string
		want  string
		error error
	}{
		{"255 bytes after unescaping", `"` + k254 + `\""`, k254 + `"`, nil},
		{"256 bytes after unescaping", `"` + k254 + `\"\\"`, "", idem.ErrKeyTooLong},
		{"255 bytes of UTF-8", e127 + "k", e127 + "k", nil},
		{"256 bytes of UTF-8, 128 characters", e127 + "é", "", idem.ErrKeyTooLong},
		{"255 bytes with spaces around", "  " + strings.Repeat("k", 255) + "\t", strings.Repeat("k", 255), nil},
		{"C1 control", "a\u0085b", "", idem.ErrKeyControl},
		{"tab inside", "a\tb", "", idem.ErrKeyControl},
		{"tab inside sf-string", "\"a\tb\"", "", idem.ErrKeyControl},
		{"tabs only", "\t\t", "", idem.ErrKeyEmpty},
		{"lone quote", `"`, "", idem.ErrKeyMalformed},
		{"quote inside raw", `a"b`, `a"b`, nil},
		{"semicolon inside sf-string", `"a;b=1"`, "a;b=1", nil},
		{"raw with parameter-like text", "k1;a=1", "k1;a=1", nil},
		{"parameters after spaces", `"k1"  ;a=1`, "", idem.ErrKeyMalformed},
		{"second sf-string after spaces", `"k1" , "k2"`, "", idem.ErrKeyMultiple},
		{"trailing comma", `"k1",`, "", idem.ErrKeyMultiple},
		{"raw trailing comma", `k1,`, "", idem.ErrKeyMultiple},
		{"CR LF inside", "a\r\nb", "", idem.ErrKeyControl},
		{"invalid UTF-8 in sf-string", "\"a\xffb\"", "", idem.ErrKeyMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := idem.ParseKey(httpNS, tc.in)
			if tc.error != nil {
				if !errors.Is(err, tc.error) || !errors.Is(err, idem.ErrInvalidKey) {
					t.Fatalf("ParseKey = %q, %v; want %v (and ErrInvalidKey)", k.Value(), err, tc.error)
				}
				return
			}
			if err != nil || k.Value() != tc.want {
				t.Fatalf("ParseKey = %q, %v; want %q", k.Value(), err, tc.want)
			}
		})
	}
}

// TestParseHeaderLines: a header given on several lines is refused
// whatever the lines hold (the same key twice, or one empty line beside
// a key), and a single empty line is an empty key, not a missing one.
func TestParseHeaderLines(t *testing.T) {
	for name, lines := range map[string][]string{
		"same key twice":  {"k1", "k1"},
		"key and empty":   {"k1", ""},
		"sf-string twice": {`"k1"`, `"k1"`},
	} {
		if _, err := idem.ParseHeader(httpNS, lines); !errors.Is(err, idem.ErrKeyMultiple) || !errors.Is(err, idem.ErrInvalidKey) {
			t.Errorf("%s: %v, want ErrKeyMultiple", name, err)
		}
	}
	if _, err := idem.ParseHeader(httpNS, []string{""}); !errors.Is(err, idem.ErrKeyEmpty) || errors.Is(err, idem.ErrKeyMissing) {
		t.Errorf("one empty line: %v, want ErrKeyEmpty (not ErrKeyMissing)", err)
	}
	if _, err := idem.ParseHeader(httpNS, []string{}); !errors.Is(err, idem.ErrKeyMissing) {
		t.Errorf("no line (empty slice): %v, want ErrKeyMissing", err)
	}
}
