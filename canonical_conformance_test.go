package idem_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemgo/idem"
)

// TestS13CanonicalJSONVectors pins S13 on the public API: idem.CanonicalJSON
// reproduces every RFC 8785 test vector (the ones internal/canonjson is
// tested on), and its output is a fixed point.
func TestS13CanonicalJSONVectors(t *testing.T) {
	dir := filepath.Join("internal", "canonjson", "testdata", "rfc8785")
	inputs, err := filepath.Glob(filepath.Join(dir, "input", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(inputs) == 0 {
		t.Fatalf("no RFC 8785 vectors in %s", dir)
	}
	for _, in := range inputs {
		name := filepath.Base(in)
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(filepath.Join(dir, "output", name))
			if err != nil {
				t.Fatal(err)
			}
			got, err := idem.CanonicalJSON(src, nil)
			if err != nil {
				t.Fatalf("CanonicalJSON: %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("CanonicalJSON mismatch\n got: %s\nwant: %s", got, want)
			}
			again, err := idem.CanonicalJSON(got, nil)
			if err != nil || !bytes.Equal(again, want) {
				t.Errorf("CanonicalJSON(output) = %s, %v; want %s", again, err, want)
			}
		})
	}
}

// TestS13CanonicalJSONRejects pins S13's rejections and limits on the
// public API: each comes back as a *JSONError wrapping its ErrJSON…
// sentinel, and input at a limit is accepted.
func TestS13CanonicalJSONRejects(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	for _, tc := range []struct {
		name string
		src  string
		lim  *idem.CanonicalLimits
		want error // nil: accepted
	}{
		{"duplicate name", `{"a":1,"a":2}`, nil, idem.ErrJSONDuplicateName},
		{"duplicate name after unescaping", `{"a":1,"\u0061":2}`, nil, idem.ErrJSONDuplicateName},
		{"duplicate name in nested object", `[{"x":{"b":1,"b":2}}]`, nil, idem.ErrJSONDuplicateName},
		{"invalid UTF-8 in string", "\"a\xffb\"", nil, idem.ErrJSONInvalidUTF8},
		{"invalid UTF-8 in name", "{\"\xfe\":1}", nil, idem.ErrJSONInvalidUTF8},
		{"UTF-8 encoded surrogate", "\"\xed\xa0\x80\"", nil, idem.ErrJSONInvalidUTF8},
		{"lone high surrogate", `"\ud800"`, nil, idem.ErrJSONLoneSurrogate},
		{"lone low surrogate", `"\udc00"`, nil, idem.ErrJSONLoneSurrogate},
		{"lone surrogate in name", `{"\udfff":1}`, nil, idem.ErrJSONLoneSurrogate},
		{"surrogate pair", `"\ud83d\ude00"`, nil, nil},
		{"depth at limit", deep(3), &idem.CanonicalLimits{MaxDepth: 3}, nil},
		{"depth over limit", deep(4), &idem.CanonicalLimits{MaxDepth: 3}, idem.ErrJSONTooDeep},
		{"default depth at limit", deep(128), nil, nil},
		{"default depth over limit", deep(129), nil, idem.ErrJSONTooDeep},
		{"size at limit", `[1,2]`, &idem.CanonicalLimits{MaxBytes: 5}, nil},
		{"size over limit", `[1,22]`, &idem.CanonicalLimits{MaxBytes: 5}, idem.ErrJSONTooLarge},
		{"default size over limit", "1" + strings.Repeat(" ", 8<<20), nil, idem.ErrJSONTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := idem.CanonicalJSON([]byte(tc.src), tc.lim)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("CanonicalJSON = %v, want it accepted", err)
				}
				return
			}
			var je *idem.JSONError
			if !errors.Is(err, tc.want) || !errors.As(err, &je) {
				t.Fatalf("CanonicalJSON = %q, %v; want %v as a *JSONError", out, err, tc.want)
			}
			if out != nil {
				t.Errorf("rejected input returned output %q", out)
			}
		})
	}
}
