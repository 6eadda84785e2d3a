package canonjson

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

func TestMemberOrder(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"already sorted", `{"a":1,"b":2}`, `{"a":1,"b":2}`},
		{"reversed", `{"b":2,"a":1}`, `{"a":1,"b":2}`},
		{"empty name first", `{"a":1,"":0}`, `{"":0,"a":1}`},
		{"prefix sorts first", `{"aa":2,"a":1,"ab":3}`, `{"a":1,"aa":2,"ab":3}`},
		{"upper case before lower case", `{"a":1,"B":2,"A":3}`, `{"A":3,"B":2,"a":1}`},
		{"digits as strings, not numbers", `{"9":1,"10":2,"1":3,"111":4}`, `{"1":3,"10":2,"111":4,"9":1}`},
		{
			"UTF-16 order: BMP below surrogates, astral, then BMP above surrogates",
			`{"\ufb33":5,"\ud83d\ude00":4,"\u20ac":3,"\u00f6":2,"a":1}`,
			"{\"a\":1,\"\u00f6\":2,\"\u20ac\":3,\"\U0001F600\":4,\"\ufb33\":5}",
		},
		{
			"astral sorts before U+E000 though its code point is larger",
			`{"\ue000":2,"\ud800\udc00":1}`,
			"{\"\U00010000\":1,\"\ue000\":2}",
		},
		{
			"astral characters among themselves by code point",
			`{"\udbff\udfff":3,"\ud83d\ude02":2,"\ud83d\ude00":1}`,
			"{\"\U0001F600\":1,\"\U0001F602\":2,\"\U0010FFFF\":3}",
		},
		{"escaped names sort by their value", `{"\u0062":2,"\u0061":1}`, `{"a":1,"b":2}`},
		{"control character names", `{"\r":2,"\n":1,"\u0000":0}`, `{"\u0000":0,"\n":1,"\r":2}`},
		{"nested objects sorted independently", `{"b":{"d":1,"c":2},"a":[{"f":1,"e":2}]}`, `{"a":[{"e":2,"f":1}],"b":{"c":2,"d":1}}`},
		{"same name at different levels", `{"a":{"a":{"a":1}}}`, `{"a":{"a":{"a":1}}}`},
		{
			"long values move with their names",
			`{"z":{"y":[1,2,{"x":"\n"}],"w":null},"m":"mid","a":[[],{}]}`,
			`{"a":[[],{}],"m":"mid","z":{"w":null,"y":[1,2,{"x":"\n"}]}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Canonicalize([]byte(tt.in), Limits{})
			if err != nil {
				t.Fatalf("Canonicalize(%s): %v", tt.in, err)
			}
			if string(got) != tt.want {
				t.Errorf("Canonicalize(%s)\n got: %s\nwant: %s", tt.in, got, tt.want)
			}
		})
	}
}

// TestDeepUnsortedObjects nests objects whose members are out of order far
// deeper than the default limit; reordering must stay linear and correct.
func TestDeepUnsortedObjects(t *testing.T) {
	for _, depth := range []int{1, 2, 3, 1000, 100000} {
		in := strings.Repeat(`{"b":0,"a":`, depth) + "1" + strings.Repeat("}", depth)
		want := strings.Repeat(`{"a":`, depth) + "1" + strings.Repeat(`,"b":0}`, depth)
		got, err := Canonicalize([]byte(in), Limits{MaxDepth: depth})
		if err != nil {
			t.Fatalf("depth %d: %v", depth, err)
		}
		if string(got) != want {
			t.Fatalf("depth %d: got %.200s, want %.200s", depth, got, want)
		}
	}
	// Sorted and unsorted objects at many levels, in arrays and as members
	// whose sorted position is first, middle and last.
	in := `[{"m":{"z":[{"c":3,"b":{"y":1,"x":2},"a":1}],"a":{"b":{"d":1,"c":2},"a":0}},"a":[{"b":1,"a":2},{"a":1,"b":2}],"z":{"b":{},"a":[]}},{"b":[],"a":{"d":{"f":1,"e":2},"c":3}}]`
	want := `[{"a":[{"a":2,"b":1},{"a":1,"b":2}],"m":{"a":{"a":0,"b":{"c":2,"d":1}},"z":[{"a":1,"b":{"x":2,"y":1},"c":3}]},"z":{"a":[],"b":{}}},{"a":{"c":3,"d":{"e":2,"f":1}},"b":[]}]`
	got, err := Canonicalize([]byte(in), Limits{})
	if err != nil || string(got) != want {
		t.Errorf("Canonicalize(%s)\n got: %s, %v\nwant: %s", in, got, err, want)
	}
}

// TestCompareNames checks compareNames against a direct comparison of
// UTF-16 code units, on random strings drawn from characters around every
// boundary that matters.
func TestCompareNames(t *testing.T) {
	alphabet := []rune{0, 'A', 'a', 0x7f, 0x80, 0xff, 0x7ff, 0x800, 0xd7ff, 0xe000, 0xfb33, 0xffff, 0x10000, 0x1f600, 0x10ffff}
	ref := func(a, b string) int {
		return slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
	}
	r := rand.New(rand.NewPCG(3, 4))
	randString := func() string {
		var b []byte
		for range r.IntN(4) {
			b = utf8.AppendRune(b, alphabet[r.IntN(len(alphabet))])
		}
		return string(b)
	}
	for range 100000 {
		a, b := randString(), randString()
		if got, want := compareNames([]byte(a), []byte(b)), ref(a, b); got != want {
			t.Fatalf("compareNames(%+q, %+q) = %d, want %d", a, b, got, want)
		}
	}
}
