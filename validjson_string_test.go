package idem

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
	"unicode/utf8"
)

// TestValidJSONLongStrings checks validJSON on strings long enough for its
// eight-bytes-at-a-time scan: every byte value at every place in and after
// a word, and random strings mixing plain bytes, escapes and UTF-8.
func TestValidJSONLongStrings(t *testing.T) {
	check := func(doc []byte) {
		t.Helper()
		want := json.Valid(doc) && utf8.Valid(doc)
		if got := validJSON(doc); got != want {
			t.Fatalf("validJSON(%q) = %v, want %v", doc, got, want)
		}
	}
	for c := range 256 {
		for at := 1; at < 21; at++ {
			doc := []byte(`"abcdefghijklmnopqrstuvwxyz"`)
			doc[at] = byte(c)
			check(doc)
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	pieces := []string{"a", " ", "~", "\x7f", "\x1f", "\x00", `\"`, `\\`, `\n`, `\u00e9`, `\x`, `"`, "é", "€", "\xff", "\xe2\x82"}
	for range 50_000 {
		doc := []byte(`"`)
		for range r.IntN(20) {
			doc = append(doc, pieces[r.IntN(len(pieces))]...)
		}
		check(append(doc, '"'))
	}
}
