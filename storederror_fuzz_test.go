package idem_test

import (
	"encoding/json"
	"errors"
	"testing"
	"unicode/utf8"

	"github.com/idemgo/idem"
)

// asJSONDecodes is s as encoding/json gives it back after encoding it:
// each byte that is not part of valid UTF-8 replaced with U+FFFD.
func asJSONDecodes(s string) string {
	r := make([]rune, 0, len(s))
	for _, c := range s {
		r = append(r, c)
	}
	return string(r)
}

// FuzzStoredError checks the StoredError a store keeps and replays: its
// JSON encoding decodes to the same error (text that is not UTF-8 comes
// back with U+FFFD, as encoding/json does), replaying it through ErrorOf
// records it unchanged and as permanent, its Error is the message or
// else the class, and ErrorOf of a Permanent error keeps the class given
// (or the Go type for an empty one) and the message.
func FuzzStoredError(f *testing.F) {
	f.Add("payment.declined", "card declined", "insufficient funds")
	f.Add("", "", "")
	f.Add("*fs.PathError", "open x: no such file", "no such file")
	f.Add("cl\xffass", "nul\x00 <html> \u2028", "\"quoted\\\"")
	f.Fuzz(func(t *testing.T, class, message, cause string) {
		se := idem.StoredError{Class: class, Message: message, Cause: cause}
		b, err := json.Marshal(se)
		if err != nil || !json.Valid(b) || !utf8.Valid(b) {
			t.Fatalf("json.Marshal(%#v) = %q, %v", se, b, err)
		}
		var back idem.StoredError
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("json.Unmarshal(%s): %v", b, err)
		}
		want := idem.StoredError{Class: asJSONDecodes(class), Message: asJSONDecodes(message), Cause: asJSONDecodes(cause)}
		if back != want {
			t.Fatalf("%#v round-trips through %s to %#v", se, b, back)
		}
		if got := idem.ErrorOf(&back); got != back {
			t.Fatalf("ErrorOf(replayed %#v) = %#v", back, got)
		}
		if !idem.IsPermanent(&back) {
			t.Fatalf("a replayed StoredError is not permanent")
		}
		if want := back.Message; want == "" && back.Error() != back.Class || want != "" && back.Error() != want {
			t.Fatalf("Error() = %q for %#v", back.Error(), back)
		}
		if message == "" {
			return
		}
		p := idem.Permanent(class, errors.New(message))
		got := idem.ErrorOf(p)
		wantClass := class
		if class == "" {
			wantClass = "*errors.errorString"
		}
		if got.Class != wantClass || got.Message != message || got.Cause != "" || !idem.IsPermanent(p) {
			t.Fatalf("ErrorOf(Permanent(%q, %q)) = %#v", class, message, got)
		}
	})
}
