package idem

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

var validJSONCases = []string{
	``, ` `, `null`, `true`, `false`, `nul`, `truex`, `0`, `-0`, `01`, `-`, `1.`, `1.5`, `1e`, `1e+`, `1E-7`, `-1.5e10`, `+1`,
	`""`, `"a"`, `"\u00e9"`, `"\u00g9"`, `"\x"`, `"\/\b\f\n\r\t\"\\"`, `"unterminated`, "\"tab\there\"", "\"\xff\"", "\"é\"",
	"\"\xed\xa0\x80\"", `"\ud800"`, `{}`, `[]`, `{ }`, `[ ]`, `{"a":1}`, `{"a" : 1 , "b":[1,2,{"c":null}]}`, `{"a":1,}`,
	`[1,]`, `[,1]`, `{,}`, `{"a"}`, `{"a":}`, `{1:2}`, `[1 2]`, `{"a":1 "b":2}`, `[}`, `{]`, `[[[]]]`, `[[[]]`, `1 2`,
	" \t\r\n{}\n ", "{}\x00", `{"a":[true,false,null,"x",-1.25e-3,{}]}`, "\xff", `[1]]`, `{"a":{"b":{}}}}`,
	strings.Repeat("[", 600) + strings.Repeat("]", 600),
	strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
	strings.Repeat(`{"a":`, 100) + "1" + strings.Repeat("}", 100),
}

func TestValidJSON(t *testing.T) {
	for _, c := range validJSONCases {
		want := json.Valid([]byte(c)) && utf8.ValidString(c)
		got := validJSON([]byte(c))
		if got && !want {
			t.Errorf("validJSON(%.40q) = true, want false", c)
		}
		if !got && want && depthOf([]byte(c)) <= fastDepth {
			t.Errorf("validJSON(%.40q) = false, want true", c)
		}
		if err := CheckPayload("x", []byte(c), 1<<20); (err == nil) != want {
			t.Errorf("CheckPayload(%.40q) = %v, want valid %v", c, err, want)
		}
	}
}

// FuzzValidJSON checks that the fast validator agrees with encoding/json
// and utf8.Valid.
func FuzzValidJSON(f *testing.F) {
	for _, c := range validJSONCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		want := json.Valid(b) && utf8.Valid(b)
		got := validJSON(b)
		if got && !want {
			t.Fatalf("validJSON(%q) = true, want false", b)
		}
		if !got && want && depthOf(b) <= fastDepth {
			t.Fatalf("validJSON(%q) = false, want true", b)
		}
	})
}

// depthOf is the deepest bracket nesting outside strings.
func depthOf(b []byte) int {
	depth, deepest, inString := 0, 0, false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case !inString && (c == '[' || c == '{'):
			depth++
			deepest = max(deepest, depth)
		case !inString && (c == ']' || c == '}'):
			depth--
		}
	}
	return deepest
}

func BenchmarkCheckPayload(b *testing.B) {
	doc := []byte(`{"v":1,"status":201,"header":{"Content-Type":["application/json"]},"body":"eyJpZCI6ImNoXzEiLCJhbW91bnQiOjEwMCwiY3VycmVuY3kiOiJFVVIifQ=="}`)
	b.SetBytes(int64(len(doc)))
	for range b.N {
		if err := CheckPayload("result", doc, 0); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkValidJSONOnly(b *testing.B) {
	doc := []byte(`{"v":1,"status":201,"header":{"Content-Type":["application/json"]},"body":"eyJpZCI6ImNoXzEiLCJhbW91bnQiOjEwMCwiY3VycmVuY3kiOiJFVVIifQ=="}`)
	b.Run("fast", func(b *testing.B) {
		for range b.N {
			validJSON(doc)
		}
	})
	b.Run("std", func(b *testing.B) {
		for range b.N {
			_ = json.Valid(doc) && utf8.Valid(doc)
		}
	})
}

// CheckPayload's error says what is wrong with a payload that is not
// JSON, or is nested deeper than encoding/json follows (10000 levels).
func TestCheckPayloadSaysWhy(t *testing.T) {
	deep := []byte(strings.Repeat("[", 10001) + strings.Repeat("]", 10001))
	for _, c := range []struct {
		payload []byte
		want    string
	}{
		{[]byte(`{"a":x}`), "invalid character 'x'"},
		{[]byte(`{"a":1`), "unexpected end of JSON input"},
		{deep, "exceeded max depth"},
	} {
		err := CheckPayload("result", c.payload, 1<<20)
		if !errors.Is(err, ErrInvalidPayload) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "result") {
			t.Errorf("CheckPayload(%.20q…) = %v; want ErrInvalidPayload naming the result and saying %q", c.payload, err, c.want)
		}
	}
}
