package durable

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/idemgo/idem/internal/pgstorable"
)

// FuzzCheckPayload checks the check every state, result and signal payload
// passes before it is written: a document over the limit is refused with a
// *PayloadTooLargeError saying its size, and any other exactly when jsonb
// cannot store it, with ErrUnstorable. A state encoded by encoding/json
// from a string and a number is refused exactly when the string holds a
// NUL or the number is beyond jsonb's, and a stored one decodes back to
// the string (bytes that are not UTF-8 as U+FFFD).
func FuzzCheckPayload(f *testing.F) {
	f.Add([]byte(`{"a":"b"}`), 0, "plain", "1")
	f.Add([]byte(`"a\u0000b"`), 100, "nul\x00", "1e131072")
	f.Add([]byte(`["\ud800"]`), 3, "\xff\xfe", "-0.5e-16383")
	f.Add([]byte(`[1e-16384]`), -1, "\u2028", "0e1073741823")
	f.Fuzz(func(t *testing.T, doc []byte, limit int, s, num string) {
		if !json.Valid(doc) || !utf8.Valid(doc) {
			doc = nil
		}
		if doc != nil {
			err := checkPayload("state", doc, limit)
			if limit > 0 && len(doc) > limit {
				var pe *PayloadTooLargeError
				if !errors.As(err, &pe) || !errors.Is(err, ErrPayloadTooLarge) || pe.What != "state" || pe.Size != len(doc) || pe.Limit != limit {
					t.Fatalf("checkPayload(%d bytes, %d) = %v", len(doc), limit, err)
				}
			} else if want := pgstorable.JSONB(doc); (err == nil) != (want == nil) || err != nil && !errors.Is(err, ErrUnstorable) {
				t.Fatalf("checkPayload(%q) = %v; jsonb says %v", doc, err, want)
			}
		}
		state := map[string]any{"s": s}
		numOK := json.Valid([]byte(num)) && num != "" && (num[0] == '-' || '0' <= num[0] && num[0] <= '9') && !strings.ContainsAny(num, " \t\r\n")
		if numOK {
			state["n"] = json.Number(num)
		}
		b, err := json.Marshal(state)
		if err != nil {
			t.Fatal(err)
		}
		err = checkPayload("state", b, 0)
		want := !strings.Contains(s, "\x00") && (!numOK || pgstorable.Number([]byte(num)) == nil)
		if (err == nil) != want {
			t.Fatalf("checkPayload(%q) = %v; want stored %v", b, err, want)
		}
		var back struct{ S string }
		if err := json.Unmarshal(b, &back); err != nil || back.S != string([]rune(s)) {
			t.Fatalf("%q decodes to %q, %v", b, back.S, err)
		}
	})
}
