package canonjson

import (
	"math/big"
	"strings"
	"testing"
)

func exact(t testing.TB, in string) string {
	t.Helper()
	out, err := AppendExact(nil, []byte(in), Limits{})
	if err != nil {
		t.Fatalf("AppendExact(%s): %v", in, err)
	}
	return string(out)
}

// AppendExact writes a number whose RFC 8785 form has another value with
// its exact value, in RFC 8785's notation, and every other number as RFC
// 8785 does.
func TestExactNumbers(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		// RFC 8785 keeps their value: its form.
		{"0", "0"}, {"-0.0e10", "0"}, {"4.50", "4.5"}, {"1E2", "100"}, {"1e21", "1e+21"},
		{"0.1", "0.1"}, {"1.5e-7", "1.5e-7"}, {"9007199254740992", "9007199254740992"},
		{"123456789012345680000", "123456789012345680000"}, {"0.30000000000000004", "0.30000000000000004"},
		{"5e-324", "5e-324"}, {"1.7976931348623157e308", "1.7976931348623157e+308"},
		// RFC 8785 would change their value: exact.
		{"9007199254740993", "9007199254740993"},
		{"-9007199254740993", "-9007199254740993"},
		{"9007199254740993.000", "9007199254740993"},
		{"90071992547409930e-1", "9007199254740993"},
		{"12345678901234567", "12345678901234567"},
		{"123456789012345678901", "123456789012345678901"},
		{"1000000000000000000001", "1.000000000000000000001e+21"},
		{"1.00000000000000000001", "1.00000000000000000001"},
		{"0.1000000000000000055511151231257827021181583404541015625", "0.1000000000000000055511151231257827021181583404541015625"},
		{"1e-400", "1e-400"},
		{"-10.0e-401", "-1e-400"},
		{"0.000000123456789012345678", "1.23456789012345678e-7"},
		{"1e-99999999999999999999999", "1e-99999999999999999999999"},
		{"-120e-99999999999999999999999", "-1.2e-99999999999999999999997"},
		{"0.0001e-0000000000000000000000400", "1e-404"},
	} {
		if got := exact(t, c.in); got != c.want {
			t.Errorf("AppendExact(%s) = %s, want %s", c.in, got, c.want)
		}
	}
	// Inside documents, with members to reorder.
	if got, want := exact(t, `{"b":1e-400,"a":[9007199254740993, 1.5]}`), `{"a":[9007199254740993,1.5],"b":1e-400}`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// FuzzExactNumber: AppendExact writes a number as a text with exactly the
// literal's value, so two literals get the same text exactly when they
// have the same value; and RFC 8785's text whenever that has the value.
func FuzzExactNumber(f *testing.F) {
	for _, s := range []string{"0", "-0.0", "9007199254740993", "1e-400", "0.1", "1e21", "123.456e-7", "1000000000000000000001", "0.30000000000000004"} {
		f.Add(s, "1")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		ra, ok := literal(a)
		if !ok {
			return
		}
		ea := exact(t, a)
		if got, ok := new(big.Rat).SetString(ea); !ok || got.Cmp(ra) != 0 {
			t.Fatalf("AppendExact(%s) = %s, another value", a, ea)
		}
		ca, _ := AppendCanonical(nil, []byte(a), Limits{})
		if got, ok := new(big.Rat).SetString(string(ca)); ok && got.Cmp(ra) == 0 && string(ca) != ea {
			t.Fatalf("AppendExact(%s) = %s, but RFC 8785's %s has its value", a, ea, ca)
		}
		rb, ok := literal(b)
		if !ok {
			return
		}
		if eb := exact(t, b); (ea == eb) != (ra.Cmp(rb) == 0) {
			t.Fatalf("AppendExact: %s → %s, %s → %s; values equal: %v", a, ea, b, eb, ra.Cmp(rb) == 0)
		}
	})
}

// literal returns the value of s if s is a JSON number AppendCanonical
// takes, with an exponent small enough for big.Rat.
func literal(s string) (*big.Rat, bool) {
	if _, err := AppendCanonical(nil, []byte(s), Limits{}); err != nil || strings.ContainsAny(s, " \t\r\n[]{}\",:tfn") {
		return nil, false
	}
	if i := strings.IndexAny(s, "eE"); i >= 0 && len(strings.TrimLeft(strings.TrimLeft(s[i+1:], "+-"), "0")) > 4 {
		return nil, false
	}
	return new(big.Rat).SetString(s)
}
