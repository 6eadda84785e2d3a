package pgstore

import (
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/internal/pgstorable"
)

// FuzzErrorPayload checks the error_payload column's encoding: a stored
// error too large for maxPayload is refused with a *PayloadTooLargeError
// saying its size; any other is encoded as JSON that jsonb stores, within
// the limit, and decodes to the error with each NUL and each byte that is
// not UTF-8 replaced by U+FFFD; and decodeError reads any bytes without
// panicking, giving an error that encodes and decodes to itself.
func FuzzErrorPayload(f *testing.F) {
	f.Add("payment.declined", "card declined", "insufficient funds", uint16(1024), []byte(`{"class":"x","message":"m"}`))
	f.Add("", "", "", uint16(0), []byte(`{}`))
	f.Add("c\x00", "nul\x00 and \xff\xfe", "\u2028\"\\", uint16(40), []byte(`{"class":"\u0000","cause":1}`))
	f.Add(strings.Repeat("c", 300), "m", "", uint16(310), []byte(`null`))
	f.Fuzz(func(t *testing.T, class, message, cause string, maxPayload uint16, stored []byte) {
		se := idem.StoredError{Class: class, Message: message, Cause: cause}
		b, err := encodeError(se, int(maxPayload))
		if err != nil {
			var pe *idem.PayloadTooLargeError
			if !errors.As(err, &pe) || !errors.Is(err, idem.ErrPayloadTooLarge) || pe.What != "error" || pe.Size <= int(maxPayload) || pe.Limit != int(maxPayload) {
				t.Fatalf("encodeError(%#v, %d): %v", se, maxPayload, err)
			}
		} else {
			if len(b) > int(maxPayload) || !json.Valid(b) || !utf8.Valid(b) {
				t.Fatalf("encodeError(%#v, %d) = %q", se, maxPayload, b)
			}
			if err := pgstorable.JSONB(b); err != nil {
				t.Fatalf("encodeError(%#v) = %q, which jsonb refuses: %v", se, b, err)
			}
			got, err := decodeError(b)
			want := idem.StoredError{Class: pgstorable.CleanText(class), Message: pgstorable.CleanText(message), Cause: pgstorable.CleanText(cause)}
			if err != nil || *got != want {
				t.Fatalf("decodeError(%q) = %#v, %v; want %#v", b, got, err, want)
			}
		}
		got, err := decodeError(stored)
		if err != nil {
			return
		}
		if !json.Valid(stored) {
			t.Fatalf("decodeError accepted %q, which is not JSON", stored)
		}
		b, err = encodeError(*got, 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		again, err := decodeError(b)
		if err != nil || *again != (idem.StoredError{Class: pgstorable.CleanText(got.Class), Message: pgstorable.CleanText(got.Message), Cause: pgstorable.CleanText(got.Cause)}) {
			t.Fatalf("%q decodes to %#v, which encodes to %q and decodes to %#v, %v", stored, got, b, again, err)
		}
	})
}

// FuzzParseTable checks that parseTable accepts exactly what it documents
// for Config.Table (name or schema.name, each part 1–48 bytes of a-z, 0-9 and
// '_', not starting with a digit), keeps the parts and the name as
// given, and quotes them for SQL as PostgreSQL reads them.
func FuzzParseTable(f *testing.F) {
	for _, s := range []string{"idempotency_record", "idem.records", "", ".", "a.", ".a", "a.b.c", "Records", "1a", "a1", "_", "a-b", `a"b`, "é",
		strings.Repeat("a", 48), strings.Repeat("a", 49), strings.Repeat("s", 48) + "." + strings.Repeat("t", 48)} {
		f.Add(s)
	}
	valid := regexp.MustCompile(`^[a-z_][a-z0-9_]{0,47}(\.[a-z_][a-z0-9_]{0,47})?$`)
	f.Fuzz(func(t *testing.T, s string) {
		tb, err := parseTable(s)
		if !valid.MatchString(s) {
			if err == nil {
				t.Fatalf("parseTable(%q) = %#v, want an error", s, tb)
			}
			return
		}
		if err != nil || tb.String() != s {
			t.Fatalf("parseTable(%q) = %#v, %v", s, tb, err)
		}
		schema, name, qualified := strings.Cut(s, ".")
		if !qualified {
			schema, name = "", s
		}
		if tb.schema != schema || tb.name != name {
			t.Fatalf("parseTable(%q) = schema %q name %q", s, tb.schema, tb.name)
		}
		want := `"` + name + `"`
		if qualified {
			want = `"` + schema + `".` + want
		}
		if tb.ident() != want || tb.indexIdent() != `"`+name+`_purge_idx"` {
			t.Fatalf("parseTable(%q): ident %s, index %s", s, tb.ident(), tb.indexIdent())
		}
	})
}
