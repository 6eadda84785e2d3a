package idem_test

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/idemgo/idem"
)

// mintedValue is the form of every minted key value.
var mintedValue = regexp.MustCompile(`^m1:[0-9a-f]{64}$`)

// FuzzMint checks Minter.Mint against its documentation: it refuses
// exactly an empty part list and a part that is blank or not valid UTF-8
// (ErrInvalidParts); an accepted list gives the same key every time, in
// the minter's namespace, valued "m1:" and 64 lowercase hex digits, which
// ParseKey reads back as the same key; moving bytes between parts,
// dropping a part or minting under another namespace gives another key.
func FuzzMint(f *testing.F) {
	f.Add(uint8(2), "tenant-1", "order-42", "charge")
	f.Add(uint8(1), "a", "", "")
	f.Add(uint8(3), "ab", "c", "x")
	f.Add(uint8(2), "a", "bc", "")
	f.Add(uint8(0), "", "", "")
	f.Add(uint8(2), " ", "\t", "\u00a0")
	f.Add(uint8(1), "caf\xe9", "", "")
	f.Add(uint8(3), "é", "\x00", "中😀")
	orders := idem.MustNamespace("orders")
	m, err := idem.NewMinter(orders)
	if err != nil {
		f.Fatal(err)
	}
	other, err := idem.NewMinter(idem.MustNamespace("orders2"))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, n uint8, a, b, c string) {
		parts := []string{a, b, c}[:n%4]
		k, err := m.Mint(parts...)
		valid := len(parts) > 0
		for _, p := range parts {
			valid = valid && strings.TrimSpace(p) != "" && utf8.ValidString(p)
		}
		if !valid {
			if !errors.Is(err, idem.ErrInvalidParts) || !k.IsZero() {
				t.Fatalf("Mint(%q) = %#v, %v; want ErrInvalidParts", parts, k, err)
			}
			return
		}
		if err != nil || k.Namespace() != orders || k.Scope() != "" || !mintedValue.MatchString(k.Value()) {
			t.Fatalf("Mint(%q) = %#v, %v", parts, k, err)
		}
		if again, err := m.Mint(parts...); err != nil || again != k {
			t.Fatalf("Mint(%q) twice: %#v then %#v, %v", parts, k, again, err)
		}
		if parsed, err := idem.ParseKey(orders, k.Value()); err != nil || parsed != k {
			t.Fatalf("ParseKey(%q) = %#v, %v; want the minted key", k.Value(), parsed, err)
		}
		if o, err := other.Mint(parts...); err != nil || o.Value() == k.Value() {
			t.Fatalf("Mint(%q) in another namespace: %#v, %v; want another value", parts, o, err)
		}
		if len(parts) > 1 {
			if d, err := m.Mint(parts[:len(parts)-1]...); err != nil || d == k {
				t.Fatalf("Mint(%q) without its last part: %#v, %v", parts, d, err)
			}
			// Moving the first rune of the second part to the end of the
			// first keeps the concatenation and changes the split.
			_, size := utf8.DecodeRuneInString(parts[1])
			moved := append([]string{parts[0] + parts[1][:size], parts[1][size:]}, parts[2:]...)
			if mk, err := m.Mint(moved...); err == nil && mk == k {
				t.Fatalf("Mint(%q) and Mint(%q) give the same key", parts, moved)
			}
		}
	})
}
