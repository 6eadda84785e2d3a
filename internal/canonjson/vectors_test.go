package canonjson

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// vectorFiles lists the RFC 8785 test vectors in testdata/rfc8785: each
// input/NAME.json has its expected canonical form in output/NAME.json.
func vectorFiles(tb testing.TB) []string {
	tb.Helper()
	inputs, err := filepath.Glob(filepath.Join("testdata", "rfc8785", "input", "*.json"))
	if err != nil {
		tb.Fatal(err)
	}
	if len(inputs) == 0 {
		tb.Fatal("no RFC 8785 vectors found in testdata/rfc8785/input")
	}
	return inputs
}

func TestRFC8785Vectors(t *testing.T) {
	for _, in := range vectorFiles(t) {
		name := filepath.Base(in)
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(filepath.Join("testdata", "rfc8785", "output", name))
			if err != nil {
				t.Fatal(err)
			}
			got, err := Canonicalize(src, Limits{})
			if err != nil {
				t.Fatalf("Canonicalize: %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("Canonicalize mismatch\n got: %s\nwant: %s", got, want)
			}
			// The canonical form is a fixed point.
			again, err := Canonicalize(got, Limits{})
			if err != nil {
				t.Fatalf("Canonicalize(output): %v", err)
			}
			if !bytes.Equal(again, want) {
				t.Errorf("Canonicalize(output) = %s, want %s", again, want)
			}
		})
	}
}
