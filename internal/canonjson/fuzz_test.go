package canonjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// fuzzSeeds are hand-picked inputs near the edges of the grammar, added to
// the RFC 8785 vectors as the seed corpus.
var fuzzSeeds = []string{
	``, ` `, `0`, `-0`, `1e21`, `1e-7`, `5e-324`, `1.7976931348623157e308`, `1e400`, `-1e-400`,
	`9007199254740993`, `0.30000000000000004`, `[1,]`, `{"a":1,"a":2}`, `{"a":1,"\u0061":2}`,
	`"\ud83d\ude00"`, `"\ud800"`, `"\udc00\ud800"`, `"\u0000\u001f\u007f\u2028"`, "\"\x7f\"",
	"\xef\xbb\xbf{}", "\"\xff\"", `{"\ufb33":1,"\ud83d\ude00":2,"\u20ac":3,"a":4}`,
	`[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]`, `{"b":{"d":[1,{"f":0,"e":1}],"c":null},"a":"\n"}`,
	`truex`, `nul`, `01`, `1.`, `.5`, `"\x"`, `"\u12"`, " [ 1 , 2 ] \n",
	benchRequest,
}

func FuzzCanonicalize(f *testing.F) {
	for _, in := range vectorFiles(f) {
		src, err := os.ReadFile(in)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(src)
	}
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		orig := bytes.Clone(src)
		out, err := Canonicalize(src, Limits{})
		if !bytes.Equal(src, orig) {
			t.Fatalf("input modified")
		}
		if err != nil {
			checkFuzzError(t, src, err)
		} else {
			checkFuzzOutput(t, src, out)
		}
		// Raw bytes are rarely valid JSON, so also read them as a recipe
		// for a valid text full of out-of-order and escaped names.
		gen := generateJSON(src)
		out, err = Canonicalize(gen, Limits{})
		if err != nil {
			t.Fatalf("generated input %q: %v", gen, err)
		}
		checkFuzzOutput(t, gen, out)
	})
}

// checkFuzzOutput checks the properties of out, the canonical form of src.
func checkFuzzOutput(t *testing.T, src, out []byte) {
	t.Helper()
	if !utf8.Valid(src) || !json.Valid(src) {
		t.Fatalf("accepted input that is not valid JSON: %q", src)
	}
	if !json.Valid(out) {
		t.Fatalf("output is not valid JSON: %q", out)
	}
	again, err := Canonicalize(out, Limits{})
	if err != nil {
		t.Fatalf("canonicalising the output %q: %v", out, err)
	}
	if !bytes.Equal(again, out) {
		t.Fatalf("not idempotent:\n once: %q\ntwice: %q", out, again)
	}
	var in, got any
	if err := json.Unmarshal(src, &in); err != nil {
		t.Fatalf("encoding/json rejects accepted input %q: %v", src, err)
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("encoding/json rejects output %q: %v", out, err)
	}
	if !reflect.DeepEqual(in, got) { // cmp.Diff only to explain: it is slow
		t.Fatalf("output means something else (-input +output):\n%s", cmp.Diff(in, got))
	}
	if want := refCanonical(nil, in); !bytes.Equal(out, want) {
		t.Fatalf("output differs from the reference:\n got: %q\nwant: %q", out, want)
	}
	prefixed, err := AppendCanonical([]byte("x"), src, Limits{})
	if err != nil || !bytes.Equal(prefixed[1:], out) || prefixed[0] != 'x' {
		t.Fatalf("AppendCanonical = %q, %v; want x%q", prefixed, err, out)
	}
}

// checkFuzzError checks an error against the package contract and, for
// syntax errors, against encoding/json's own validator.
func checkFuzzError(t *testing.T, src []byte, err error) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not an *Error", err, err)
	}
	matches := 0
	for _, s := range sentinels {
		if errors.Is(err, s) {
			matches++
		}
	}
	if matches != 1 || e.Unwrap() != e.Err {
		t.Fatalf("error %v matches %d sentinels", err, matches)
	}
	if e.Offset < 0 || e.Offset > len(src) {
		t.Fatalf("offset %d outside input of %d bytes: %v", e.Offset, len(src), err)
	}
	switch {
	case errors.Is(err, ErrSyntax):
		if json.Valid(src) {
			t.Fatalf("ErrSyntax for input encoding/json accepts: %q: %v", src, err)
		}
	case errors.Is(err, ErrInvalidUTF8):
		if utf8.Valid(src) {
			t.Fatalf("ErrInvalidUTF8 for valid UTF-8: %q", src)
		}
	}
	// Duplicate names, lone surrogates and out-of-range numbers are found
	// part way through, so the rest of the input may be anything.
	_ = e.Error()
}

// refCanonical is a deliberately simple reference for the canonical form
// of a value decoded by encoding/json: recursive, map-based, sorting names
// by their UTF-16 encoding and escaping strings rune by rune. It shares only
// the number formatting with the package, which number_test.go covers.
func refCanonical(dst []byte, v any) []byte {
	switch v := v.(type) {
	case nil:
		return append(dst, "null"...)
	case bool:
		return strconv.AppendBool(dst, v)
	case float64:
		return appendNumber(dst, v)
	case string:
		return refString(dst, v)
	case []any:
		dst = append(dst, '[')
		for i, e := range v {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = refCanonical(dst, e)
		}
		return append(dst, ']')
	case map[string]any:
		names := make([]string, 0, len(v))
		for name := range v {
			names = append(names, name)
		}
		slices.SortFunc(names, func(a, b string) int {
			return slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
		})
		dst = append(dst, '{')
		for i, name := range names {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = refString(dst, name)
			dst = append(dst, ':')
			dst = refCanonical(dst, v[name])
		}
		return append(dst, '}')
	}
	panic("unexpected type")
}

// refString writes s as RFC 8785 section 3.2.2.2 describes, rune by rune.
func refString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for _, r := range s {
		switch r {
		case '"':
			dst = append(dst, `\"`...)
		case '\\':
			dst = append(dst, `\\`...)
		case '\b':
			dst = append(dst, `\b`...)
		case '\f':
			dst = append(dst, `\f`...)
		case '\n':
			dst = append(dst, `\n`...)
		case '\r':
			dst = append(dst, `\r`...)
		case '\t':
			dst = append(dst, `\t`...)
		default:
			if r < 0x20 {
				dst = append(dst, `\u00`...)
				dst = append(dst, "0123456789abcdef"[r>>4], "0123456789abcdef"[r&0xF])
			} else {
				dst = utf8.AppendRune(dst, r)
			}
		}
	}
	return append(dst, '"')
}

// genName is a member name and ways to spell it in JSON.
type genName struct {
	value     string
	spellings []string
}

// genNames are names around the UTF-16 ordering boundaries, several of
// them spelt in more than one way.
var genNames = []genName{
	{"a", []string{"a", `\u0061`}},
	{"b", []string{"b"}},
	{"", []string{""}},
	{"aa", []string{"aa", `a\u0061`}},
	{"A", []string{"A"}},
	{"10", []string{"10"}},
	{"1", []string{"1"}},
	{"\n", []string{`\n`, `\u000a`, `\u000A`}},
	{"\x00", []string{`\u0000`}},
	{"\"", []string{`\"`, `\u0022`}},
	{"/", []string{"/", `\/`}},
	{"\x7f", []string{"\x7f", `\u007f`}},
	{"é", []string{"é", `\u00e9`, `\u00E9`}},
	{"€", []string{"€", `\u20ac`}},
	{"\ue000", []string{"\ue000", `\ue000`}},
	{"\ufb33", []string{"\ufb33", `\ufb33`}},
	{"\U00010000", []string{"\U00010000", `\ud800\udc00`}},
	{"😀", []string{"😀", `\ud83d\ude00`}},
	{"\U0010ffff", []string{`\udbff\udfff`}},
}

// genScalars are scalar values in assorted spellings.
var genScalars = []string{
	"0", "-0", "1", "-1.5", "4.50", "1e21", "1E-7", "0.000001", "100", "2e-3", "0.1",
	"5e-324", "1.7976931348623157e308", "9007199254740993", "1e-400", "333333333.33333329",
	"123456789012345678901234567890", "true", "false", "null", `""`, `"x"`,
	`"\u0000\u001f\u007f"`, `"\ud83d\ude00\\\"\/"`, "\"\u2028é\"", `"\b\f\n\r\t"`,
}

// generateJSON turns arbitrary bytes into a valid JSON text with no
// duplicate names and nesting of at most 20.
func generateJSON(recipe []byte) []byte {
	g := generator{recipe: recipe}
	g.value(0)
	g.space()
	return g.out
}

// generator writes JSON as directed by the bytes of a recipe.
type generator struct {
	recipe []byte
	out    []byte
}

// next returns the next recipe byte, or 0 once the recipe is used up.
func (g *generator) next() int {
	if len(g.recipe) == 0 {
		return 0
	}
	b := g.recipe[0]
	g.recipe = g.recipe[1:]
	return int(b)
}

func (g *generator) space() {
	g.out = append(g.out, [...]string{"", "", "", " ", "\n\t", "\r\n  "}[g.next()%6]...)
}

func (g *generator) value(depth int) {
	g.space()
	kind := g.next() % 4
	if depth >= 20 || len(g.recipe) == 0 {
		kind = 3
	}
	switch kind {
	case 0, 1: // object
		g.out = append(g.out, '{')
		used := make(map[string]bool)
		for n := g.next() % 8; n > 0; n-- {
			name := genNames[g.next()%len(genNames)]
			if used[name.value] {
				continue
			}
			if len(used) > 0 {
				g.space()
				g.out = append(g.out, ',')
			}
			used[name.value] = true
			g.space()
			g.out = append(g.out, '"')
			g.out = append(g.out, name.spellings[g.next()%len(name.spellings)]...)
			g.out = append(g.out, '"')
			g.space()
			g.out = append(g.out, ':')
			g.value(depth + 1)
		}
		g.space()
		g.out = append(g.out, '}')
	case 2: // array
		g.out = append(g.out, '[')
		for i := range g.next() % 5 {
			if i > 0 {
				g.space()
				g.out = append(g.out, ',')
			}
			g.value(depth + 1)
		}
		g.space()
		g.out = append(g.out, ']')
	default:
		g.out = append(g.out, genScalars[g.next()%len(genScalars)]...)
	}
	g.space()
}
