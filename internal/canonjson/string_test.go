package canonjson

import (
	"testing"
	"unicode/utf8"
)

func TestStringEscaping(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"plain ASCII", `"hello"`, `"hello"`},
		{"empty", `""`, `""`},
		{"short escapes kept", `"\b\f\n\r\t"`, `"\b\f\n\r\t"`},
		{"quote and backslash", `"\"\\"`, `"\"\\"`},
		{"solidus unescaped", `"\/a\/"`, `"/a/"`},
		{"unicode escape of short-escape characters", `"\u0008\u000C\u000a\u000D\u0009"`, `"\b\f\n\r\t"`},
		{"unicode escape of quote and backslash", `"\u0022\u005C"`, `"\"\\"`},
		{"NUL", `"\u0000"`, `"\u0000"`},
		{"other control characters lowercase hex", `"\u0001\u000B\u000e\u001F"`, `"\u0001\u000b\u000e\u001f"`},
		{"DEL is literal", `"\u007f"`, "\"\x7f\""},
		{"raw DEL stays literal", "\"\x7f\"", "\"\x7f\""},
		{"U+0080 is literal", `"\u0080"`, "\"\u0080\""},
		{"line separator is literal", `"\u2028\u2029"`, "\"\u2028\u2029\""},
		{"raw line separator stays literal", "\"\u2028\"", "\"\u2028\""},
		{"escaped letters", `"\u0041\u0062"`, `"Ab"`},
		{"upper case hex digits", `"\u00E9\u20AC"`, `"é€"`},
		{"raw non-ASCII", `"é€😀"`, `"é€😀"`},
		{"surrogate pair", `"\ud83d\ude00"`, `"😀"`},
		{"surrogate pair upper case", `"\uD83D\uDE00"`, `"😀"`},
		{"highest code point", `"\udbff\udfff"`, "\"\U0010FFFF\""},
		{"BMP private use and noncharacters", `"\ue000\uffff\ufffe"`, "\"\ue000\uffff\ufffe\""},
		{"replacement character", `"\ufffd"`, "\"\ufffd\""},
		{"no Unicode normalisation", `"A\u030a"`, "\"A\u030a\""},
		{"escapes between plain runs", `"a\nb\u0001c\"d"`, `"a\nb\u0001c\"d"`},
		{"html characters are literal", `"</script>&<>"`, `"</script>&<>"`},
		{"BOM inside a string is literal", `"\ufeff"`, "\"\ufeff\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Canonicalize([]byte(tt.in), Limits{})
			if err != nil {
				t.Fatalf("Canonicalize(%s): %v", tt.in, err)
			}
			if string(got) != tt.want {
				t.Errorf("Canonicalize(%s) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// TestAppendStringAllCharacters writes every code point through
// appendString and checks it against RFC 8785 section 3.2.2.2 directly, and
// that canonicalising the result leaves it unchanged.
func TestAppendStringAllCharacters(t *testing.T) {
	short := map[rune]string{'"': `\"`, '\\': `\\`, '\b': `\b`, '\f': `\f`, '\n': `\n`, '\r': `\r`, '\t': `\t`}
	const hex = "0123456789abcdef"
	for r := rune(0); r <= utf8.MaxRune; r++ {
		if !utf8.ValidRune(r) {
			continue
		}
		var want string
		switch {
		case short[r] != "":
			want = short[r]
		case r < 0x20:
			want = `\u00` + string(hex[r>>4]) + string(hex[r&0xF])
		default:
			want = string(r)
		}
		want = `"` + want + `"`
		got := appendString(nil, utf8.AppendRune(nil, r))
		if string(got) != want {
			t.Fatalf("appendString(%U) = %q, want %q", r, got, want)
		}
		if r < 0x800 || r%251 == 0 {
			again, err := Canonicalize(got, Limits{})
			if err != nil || string(again) != want {
				t.Fatalf("Canonicalize(%q) = %q, %v; want %q", got, again, err, want)
			}
		}
	}
}
