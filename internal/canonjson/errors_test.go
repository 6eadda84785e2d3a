package canonjson

import (
	"errors"
	"strings"
	"testing"
)

// sentinels lists every sentinel error, to check that exactly one matches.
var sentinels = []error{
	ErrSyntax, ErrDuplicateName, ErrInvalidUTF8, ErrLoneSurrogate,
	ErrNumberRange, ErrTooDeep, ErrTooLarge,
}

func TestErrors(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	deepObj := func(n int) string { return strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n) }
	tests := []struct {
		name   string
		in     string
		lim    Limits
		err    error
		offset int
	}{
		// Duplicate names: the offset is the second occurrence's quote.
		{"duplicate name", `{"a":1,"a":2}`, Limits{}, ErrDuplicateName, 7},
		{"duplicate name equal after unescaping", `{"a":1,"\u0061":2}`, Limits{}, ErrDuplicateName, 7},
		{"duplicate escaped control name", `{"\n":1,"\u000a":2}`, Limits{}, ErrDuplicateName, 8},
		{"duplicate astral name", `{"😀":1,"\ud83d\ude00":2}`, Limits{}, ErrDuplicateName, 10},
		{"duplicate not adjacent", `{"b":1,"a":2,"b":3}`, Limits{}, ErrDuplicateName, 13},
		{"name three times", `{"a":1,"a":2,"a":3}`, Limits{}, ErrDuplicateName, 7},
		{"earliest second occurrence", `{"b":1,"a":1,"a":2,"b":2}`, Limits{}, ErrDuplicateName, 13},
		{"duplicate empty name", `{"":1,"":2}`, Limits{}, ErrDuplicateName, 6},
		{"duplicate in nested object", `[{"x":{"a":1,"a":2}}]`, Limits{}, ErrDuplicateName, 13},
		{"duplicate with different values", `{"a":{"b":1},"a":[2]}`, Limits{}, ErrDuplicateName, 13},

		// Invalid UTF-8, inside and outside strings.
		{"invalid byte in string", "\"a\xffb\"", Limits{}, ErrInvalidUTF8, 2},
		{"invalid byte outside strings", "[1,\xff]", Limits{}, ErrInvalidUTF8, 3},
		{"invalid byte in name", "{\"\xfe\":1}", Limits{}, ErrInvalidUTF8, 2},
		{"truncated sequence", "\"\xc3\"", Limits{}, ErrInvalidUTF8, 1},
		{"overlong encoding", "\"\xc0\xaf\"", Limits{}, ErrInvalidUTF8, 1},
		{"UTF-8 encoded surrogate", "\"\xed\xa0\x80\"", Limits{}, ErrInvalidUTF8, 1},
		{"beyond U+10FFFF", "\"\xf4\x90\x80\x80\"", Limits{}, ErrInvalidUTF8, 1},
		{"invalid UTF-8 after a syntax error", "} \xff", Limits{}, ErrInvalidUTF8, 2},

		// Surrogates.
		{"lone high surrogate", `"\ud800"`, Limits{}, ErrLoneSurrogate, 1},
		{"lone low surrogate", `"\udc00"`, Limits{}, ErrLoneSurrogate, 1},
		{"high surrogate then text", `"a\ud83dx"`, Limits{}, ErrLoneSurrogate, 2},
		{"high surrogate then non-surrogate escape", `"\ud800\u0041"`, Limits{}, ErrLoneSurrogate, 1},
		{"two high surrogates", `"\ud800\ud800"`, Limits{}, ErrLoneSurrogate, 1},
		{"low then high", `"\udc00\ud800"`, Limits{}, ErrLoneSurrogate, 1},
		{"high surrogate then other escape", `"\ud800\n"`, Limits{}, ErrLoneSurrogate, 1},
		{"high surrogate then bad escape", `"\ud800\uZZZZ"`, Limits{}, ErrLoneSurrogate, 1},
		{"high surrogate at end of input", `"\ud800`, Limits{}, ErrLoneSurrogate, 1},
		{"lone surrogate in name", `{"\udfff":1}`, Limits{}, ErrLoneSurrogate, 2},

		// Escapes and raw control characters.
		{"unknown escape", `"\x"`, Limits{}, ErrSyntax, 1},
		{"upper case U escape", `"\U0041"`, Limits{}, ErrSyntax, 1},
		{"single quote escape", `"\'"`, Limits{}, ErrSyntax, 1},
		{"non-hex digit", `"ab\u00g0"`, Limits{}, ErrSyntax, 3},
		{"short unicode escape", `"\u12"`, Limits{}, ErrSyntax, 1},
		{"escape at end of input", `"\`, Limits{}, ErrSyntax, 2},
		{"raw tab in string", "\"a\tb\"", Limits{}, ErrSyntax, 2},
		{"raw newline in string", "\"a\nb\"", Limits{}, ErrSyntax, 2},
		{"raw NUL in string", "\"\x00\"", Limits{}, ErrSyntax, 1},
		{"raw control character in name", "{\"\x1f\":1}", Limits{}, ErrSyntax, 2},
		{"unterminated string", `"abc`, Limits{}, ErrSyntax, 4},

		// Structure.
		{"empty input", ``, Limits{}, ErrSyntax, 0},
		{"whitespace only", " \n\t ", Limits{}, ErrSyntax, 4},
		{"byte order mark", "\xef\xbb\xbf{}", Limits{}, ErrSyntax, 0},
		{"two top-level values", `1 2`, Limits{}, ErrSyntax, 2},
		{"data after object", `{}x`, Limits{}, ErrSyntax, 2},
		{"extra closing bracket", `[]]`, Limits{}, ErrSyntax, 2},
		{"two strings", `"a""b"`, Limits{}, ErrSyntax, 3},
		{"trailing comma after value", `null,`, Limits{}, ErrSyntax, 4},
		{"literal with suffix", `truex`, Limits{}, ErrSyntax, 4},
		{"NUL after value", "1\x00", Limits{}, ErrSyntax, 1},
		{"unclosed array", `[1,2`, Limits{}, ErrSyntax, 4},
		{"unclosed object", `{"a":1`, Limits{}, ErrSyntax, 6},
		{"missing colon", `{"a" 1}`, Limits{}, ErrSyntax, 5},
		{"name then end", `{"a"`, Limits{}, ErrSyntax, 4},
		{"colon then end", `{"a":`, Limits{}, ErrSyntax, 5},
		{"missing value", `{"a":}`, Limits{}, ErrSyntax, 5},
		{"trailing comma in array", `[1,]`, Limits{}, ErrSyntax, 3},
		{"trailing comma in object", `{"a":1,}`, Limits{}, ErrSyntax, 7},
		{"leading comma in object", `{,}`, Limits{}, ErrSyntax, 1},
		{"number as name", `{1:2}`, Limits{}, ErrSyntax, 1},
		{"single-quoted name", `{'a':1}`, Limits{}, ErrSyntax, 1},
		{"mismatched brackets", `[}`, Limits{}, ErrSyntax, 1},
		{"mismatched braces", `{"a":1]`, Limits{}, ErrSyntax, 6},
		{"missing comma", `[1 2]`, Limits{}, ErrSyntax, 3},
		{"truncated literal", `tru`, Limits{}, ErrSyntax, 3},
		{"misspelt literal", `nul1`, Limits{}, ErrSyntax, 3},
		{"capitalised literal", `True`, Limits{}, ErrSyntax, 0},
		{"comment", `[1 /* x */]`, Limits{}, ErrSyntax, 3},
		{"non-ASCII outside strings", `[é]`, Limits{}, ErrSyntax, 1},
		{"vertical tab is not whitespace", "\v1", Limits{}, ErrSyntax, 0},
		{"non-breaking space is not whitespace", "\u00a01", Limits{}, ErrSyntax, 0},

		// Numbers.
		{"leading zero", `01`, Limits{}, ErrSyntax, 1},
		{"negative leading zero", `-01`, Limits{}, ErrSyntax, 2},
		{"lone minus", `-`, Limits{}, ErrSyntax, 1},
		{"minus then letter", `-a`, Limits{}, ErrSyntax, 1},
		{"plus sign", `+1`, Limits{}, ErrSyntax, 0},
		{"leading point", `.5`, Limits{}, ErrSyntax, 0},
		{"trailing point", `1.`, Limits{}, ErrSyntax, 2},
		{"point then exponent", `1.e5`, Limits{}, ErrSyntax, 2},
		{"empty exponent", `1e`, Limits{}, ErrSyntax, 2},
		{"signed empty exponent", `[1e+]`, Limits{}, ErrSyntax, 4},
		{"hex", `0x10`, Limits{}, ErrSyntax, 1},
		{"Infinity", `Infinity`, Limits{}, ErrSyntax, 0},
		{"NaN", `NaN`, Limits{}, ErrSyntax, 0},
		{"overflow", `1e400`, Limits{}, ErrNumberRange, 0},
		{"negative overflow in array", `[0,-1e400]`, Limits{}, ErrNumberRange, 3},
		{"just above the largest double", `1.7976931348623159e308`, Limits{}, ErrNumberRange, 0},
		{"overflow by digits", `{"n":1` + strings.Repeat("0", 400) + `}`, Limits{}, ErrNumberRange, 5},
		{"huge exponent", `1e99999999999999999999`, Limits{}, ErrNumberRange, 0},

		// Depth: the offset is the bracket that goes too deep.
		{"depth at limit", deep(3), Limits{MaxDepth: 3}, nil, 0},
		{"depth over limit", deep(4), Limits{MaxDepth: 3}, ErrTooDeep, 3},
		{"object depth at limit", deepObj(3), Limits{MaxDepth: 3}, nil, 0},
		{"object depth over limit", deepObj(4), Limits{MaxDepth: 3}, ErrTooDeep, 15},
		{"default depth at limit", deep(DefaultMaxDepth), Limits{}, nil, 0},
		{"default depth over limit", deep(DefaultMaxDepth + 1), Limits{}, ErrTooDeep, DefaultMaxDepth},
		{"depth limit 1", `[[]]`, Limits{MaxDepth: 1}, ErrTooDeep, 1},
		{"scalars need no depth", `1`, Limits{MaxDepth: 1}, nil, 0},
		{"siblings do not add depth", `[[],[],{"a":1},[[]]]`, Limits{MaxDepth: 3}, nil, 0},
		{"very deep input", deep(1 << 20), Limits{MaxBytes: 4 << 20}, ErrTooDeep, DefaultMaxDepth},
		{"very deep input within a large limit", deep(1 << 20), Limits{MaxBytes: 4 << 20, MaxDepth: 1 << 20}, nil, 0},

		// Size: the offset is the limit.
		{"size at limit", `[1,2]`, Limits{MaxBytes: 5}, nil, 0},
		{"size over limit", `[1,22]`, Limits{MaxBytes: 5}, ErrTooLarge, 5},
		{"whitespace counts", ` [1,2]`, Limits{MaxBytes: 5}, ErrTooLarge, 5},
		{"size checked before syntax", `[[[[[`, Limits{MaxBytes: 4}, ErrTooLarge, 4},
		{"default size at limit", "1" + strings.Repeat(" ", DefaultMaxBytes-1), Limits{}, nil, 0},
		{"default size over limit", "1" + strings.Repeat(" ", DefaultMaxBytes), Limits{}, ErrTooLarge, DefaultMaxBytes},
		{"negative limits take defaults", `[[1]]`, Limits{MaxBytes: -1, MaxDepth: -1}, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := Canonicalize([]byte(tt.in), tt.lim)
			if tt.err == nil {
				if err != nil {
					t.Fatalf("Canonicalize: unexpected error %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Canonicalize = %.80q, want error %v", out, tt.err)
			}
			if !errors.Is(err, tt.err) {
				t.Fatalf("Canonicalize error = %v, want %v", err, tt.err)
			}
			for _, s := range sentinels {
				if s != tt.err && errors.Is(err, s) {
					t.Errorf("error %v also matches %v", err, s)
				}
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v (%T) is not an *Error", err, err)
			}
			if e.Err != tt.err || e.Unwrap() != tt.err {
				t.Errorf("Err = %v, Unwrap = %v; want %v", e.Err, e.Unwrap(), tt.err)
			}
			if e.Offset != tt.offset {
				t.Errorf("Offset = %d, want %d (%v)", e.Offset, tt.offset, err)
			}
			if out != nil {
				t.Errorf("output %q returned with the error", out)
			}
		})
	}
}

func TestErrorMessages(t *testing.T) {
	tests := []struct {
		name string
		in   string
		lim  Limits
		want string
	}{
		{"duplicate", `{"a":1,"a":2}`, Limits{}, `canonjson: duplicate object member name "a" at offset 7`},
		{"duplicate with long name", `{"` + strings.Repeat("x", 100) + `":1,"` + strings.Repeat("x", 100) + `":2}`, Limits{},
			`canonjson: duplicate object member name "` + strings.Repeat("x", maxQuoted) + `"... at offset 106`},
		{"syntax", `[1 2]`, Limits{}, `canonjson: invalid JSON (unexpected '2' after array element) at offset 3`},
		{"end of input", `[1,`, Limits{}, `canonjson: invalid JSON (unexpected end of input) at offset 3`},
		{"byte order mark", "\xef\xbb\xbf1", Limits{}, `canonjson: invalid JSON (leading byte order mark) at offset 0`},
		{"control character", "\"\t\"", Limits{}, `canonjson: invalid JSON (unescaped control character '\t' in string) at offset 1`},
		{"bad escape", `"\q"`, Limits{}, `canonjson: invalid JSON (invalid escape "\\q" in string) at offset 1`},
		{"non-ASCII outside strings", `[é]`, Limits{}, `canonjson: invalid JSON (unexpected 'é' looking for a value) at offset 1`},
		{"invalid UTF-8", "[\xff]", Limits{}, `canonjson: invalid UTF-8 at offset 1`},
		{"lone surrogate", `"\uD800"`, Limits{}, `canonjson: lone UTF-16 surrogate \uD800 at offset 1`},
		{"number range", `-1e999`, Limits{}, `canonjson: number out of range "-1e999" at offset 0`},
		{"too deep", `[[`, Limits{MaxDepth: 1}, `canonjson: nesting too deep (limit 1) at offset 1`},
		{"too large", `[1]`, Limits{MaxBytes: 2}, `canonjson: input too large (limit 2 bytes) at offset 2`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Canonicalize([]byte(tt.in), tt.lim)
			if err == nil {
				t.Fatal("no error")
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("Error() = %s\n          want %s", got, tt.want)
			}
		})
	}
	t.Run("zero Error", func(t *testing.T) {
		if got, want := (&Error{}).Error(), "canonjson: error at offset 0"; got != want {
			t.Errorf("Error() = %q, want %q", got, want)
		}
	})
}
