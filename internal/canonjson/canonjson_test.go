package canonjson

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestStructure(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"literals", `[true,false,null]`, `[true,false,null]`},
		{"top-level scalar", `42`, `42`},
		{"top-level string", `"x"`, `"x"`},
		{"top-level literal", `null`, `null`},
		{"empty containers", `[{},[],{"a":[]}]`, `[{},[],{"a":[]}]`},
		{"whitespace dropped everywhere", " \t\r\n{ \"b\" :\n[ 1 ,\t2 ] , \"a\"\r: { } }\n\t ", `{"a":{},"b":[1,2]}`},
		{"whitespace inside empty containers", "[ [ ] , { \n } ]", `[[],{}]`},
		{"array order preserved", `[3,1,2]`, `[3,1,2]`},
		{"arrays of objects keep order", `[{"b":1},{"a":1}]`, `[{"b":1},{"a":1}]`},
		{"deep mixed nesting", `[[[{"b":[{"d":0,"c":1}],"a":0}]]]`, `[[[{"a":0,"b":[{"c":1,"d":0}]}]]]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Canonicalize([]byte(tt.in), Limits{})
			if err != nil {
				t.Fatalf("Canonicalize(%q): %v", tt.in, err)
			}
			if diff := cmp.Diff(tt.want, string(got)); diff != "" {
				t.Errorf("Canonicalize(%q) mismatch (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

// TestEquivalentSpellings checks that texts describing the same data have
// the same canonical form, and that arrays in another order do not.
func TestEquivalentSpellings(t *testing.T) {
	groups := []struct {
		name      string
		spellings []string
	}{
		{"member order and whitespace", []string{
			`{"a":1,"b":[true,null],"c":{"x":"y"}}`,
			`{ "c" : { "x" : "y" } , "b" : [ true , null ] , "a" : 1 }`,
			"{\n\t\"b\": [true, null],\n\t\"a\": 1,\n\t\"c\": {\"x\": \"y\"}\n}\n",
		}},
		{"number spellings", []string{`[1,0.5,100]`, `[1.0,5e-1,1E2]`, `[10e-1,0.50,100.000]`}},
		{"string spellings", []string{`["A/é"]`, `["\u0041\/\u00e9"]`, `["\u0041\u002f\u00E9"]`}},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			first, err := Canonicalize([]byte(g.spellings[0]), Limits{})
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range g.spellings[1:] {
				got, err := Canonicalize([]byte(s), Limits{})
				if err != nil {
					t.Fatalf("Canonicalize(%q): %v", s, err)
				}
				if !bytes.Equal(got, first) {
					t.Errorf("Canonicalize(%q) = %s, want %s", s, got, first)
				}
			}
		})
	}
	t.Run("array order is significant", func(t *testing.T) {
		a, _ := Canonicalize([]byte(`[1,2]`), Limits{})
		b, _ := Canonicalize([]byte(`[2,1]`), Limits{})
		if bytes.Equal(a, b) {
			t.Errorf("[1,2] and [2,1] have the same canonical form %s", a)
		}
	})
}

func TestAppendCanonical(t *testing.T) {
	prefix := []byte("prefix:")
	t.Run("appends", func(t *testing.T) {
		got, err := AppendCanonical(bytes.Clone(prefix), []byte(`{"b":1,"a":2}`), Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if want := `prefix:{"a":2,"b":1}`; string(got) != want {
			t.Errorf("AppendCanonical = %q, want %q", got, want)
		}
	})
	t.Run("keeps dst on error", func(t *testing.T) {
		dst := append(make([]byte, 0, 64), prefix...)
		got, err := AppendCanonical(dst, []byte(`{"b":1,"a":2,"a":3}`), Limits{})
		if !errors.Is(err, ErrDuplicateName) {
			t.Fatalf("err = %v, want ErrDuplicateName", err)
		}
		if string(got) != string(prefix) {
			t.Errorf("AppendCanonical on error = %q, want %q", got, prefix)
		}
	})
	t.Run("nil dst", func(t *testing.T) {
		got, err := AppendCanonical(nil, []byte(` 1 `), Limits{})
		if err != nil || string(got) != "1" {
			t.Errorf("AppendCanonical(nil, ` 1 `) = %q, %v", got, err)
		}
	})
	t.Run("Canonicalize returns nil on error", func(t *testing.T) {
		got, err := Canonicalize([]byte(`[`), Limits{})
		if err == nil || got != nil {
			t.Errorf("Canonicalize(`[`) = %q, %v; want nil and an error", got, err)
		}
	})
}

// TestConcurrent exercises the parser pool from many goroutines; run it
// with -race.
func TestConcurrent(t *testing.T) {
	inputs := map[string]string{
		`{"b":[1,2,{"d":1,"c":2}],"a":"x"}`:                 `{"a":"x","b":[1,2,{"c":2,"d":1}]}`,
		`[{"z":1,"y":2},{"x":"\u0000"},1e21]`:               `[{"y":2,"z":1},{"x":"\u0000"},1e+21]`,
		strings.Repeat("[", 100) + strings.Repeat("]", 100): strings.Repeat("[", 100) + strings.Repeat("]", 100),
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 200 {
				for in, want := range inputs {
					got, err := Canonicalize([]byte(in), Limits{})
					if err != nil || string(got) != want {
						t.Errorf("Canonicalize(%s) = %s, %v; want %s", in, got, err, want)
						return
					}
				}
				if _, err := Canonicalize([]byte(`{"a":1,"a":2}`), Limits{}); !errors.Is(err, ErrDuplicateName) {
					t.Errorf("duplicate not reported: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
}
