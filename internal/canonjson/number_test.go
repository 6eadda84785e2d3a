package canonjson

import (
	"math"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestNumberFormatting(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"zero", "0", "0"},
		{"negative zero", "-0", "0"},
		{"negative zero with fraction and exponent", "-0.0e10", "0"},
		{"one", "1", "1"},
		{"trailing fraction zeros", "4.50", "4.5"},
		{"integer written as fraction", "56.0", "56"},
		{"negative", "-1.5", "-1.5"},
		{"exponent that yields an integer", "10.50e1", "105"},
		{"upper case exponent", "1E2", "100"},
		{"explicit plus exponent", "1e+2", "100"},
		{"15 digits", "999999999999999", "999999999999999"},
		{"negative 15 digits", "-123456789012345", "-123456789012345"},
		{"16 digits round", "9999999999999999", "10000000000000000"},
		{"17 digits round", "12345678901234567", "12345678901234568"},
		{"1e20 has no exponent", "1e20", "100000000000000000000"},
		{"1e21 has an exponent", "1e21", "1e+21"},
		{"21 nines round to 1e21", "999999999999999999999", "1e+21"},
		{"large integer keeps zeros", "123456789012345680000", "123456789012345680000"},
		{"large integer rounds to shortest", "123456789012345678901", "123456789012345680000"},
		{"2 to the 68", "295147905179352825856", "295147905179352830000"},
		{"1e23", "1e23", "1e+23"},
		{"1E30", "1E30", "1e+30"},
		{"max uint32", "4294967295", "4294967295"},
		{"2 to the 53", "9007199254740992", "9007199254740992"},
		{"2 to the 53 plus 1 rounds to even", "9007199254740993", "9007199254740992"},
		{"2 to the 53 plus 3 rounds up", "9007199254740995", "9007199254740996"},
		{"0.1 plus 0.2", "0.30000000000000004", "0.30000000000000004"},
		{"0.1", "0.1", "0.1"},
		{"repeating", "333333333.33333329", "333333333.3333333"},
		{"0.002", "2e-3", "0.002"},
		{"1e-6 has no exponent", "0.000001", "0.000001"},
		{"1.234e-6 has no exponent", "0.000001234", "0.000001234"},
		{"1e-7 has an exponent", "1e-7", "1e-7"},
		{"1e-7 written out", "0.0000001", "1e-7"},
		{"1.5e-7", "0.00000015", "1.5e-7"},
		{"1.234e-7", "0.0000001234", "1.234e-7"},
		{"1e-27", "0.000000000000000000000000001", "1e-27"},
		{"negative small", "-1.23e-18", "-1.23e-18"},
		{"smallest subnormal", "5e-324", "5e-324"},
		{"smallest subnormal, long form", "4.9406564584124654e-324", "5e-324"},
		{"negative smallest subnormal", "-5e-324", "-5e-324"},
		{"smallest normal", "2.2250738585072014e-308", "2.2250738585072014e-308"},
		{"largest double", "1.7976931348623157e308", "1.7976931348623157e+308"},
		{"negative largest double", "-1.7976931348623157e308", "-1.7976931348623157e+308"},
		{"largest double plus less than half ulp", "1.7976931348623158e308", "1.7976931348623157e+308"},
		{"underflow to zero", "1e-400", "0"},
		{"negative underflow to zero", "-1e-400", "0"},
		{"long mantissa", "3.14159265358979323846264338327950288419716939937510", "3.141592653589793"},
		{"many leading fraction zeros", "0.00000000000000000000000000000000000000000000000001", "1e-50"},
		{"huge exponent on zero", "0e999999999999999999", "0"},
		{"9.999999999999999e22 is the double nearest 1e23", "9.999999999999999e22", "1e+23"},
		{"just below 1e21", "999999999999999900000", "999999999999999900000"},
		{"ECMAScript example 1e21 minus", "100000000000000000000.5", "100000000000000000000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Canonicalize([]byte(tt.in), Limits{})
			if err != nil {
				t.Fatalf("Canonicalize(%s): %v", tt.in, err)
			}
			if string(got) != tt.want {
				t.Errorf("Canonicalize(%s) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
}

// esNumber is the shape of ECMAScript Number::toString output for finite
// values: plain integers, plain decimals, or d[.ddd]e±x with no leading or
// trailing zeros in the significand.
var esNumber = regexp.MustCompile(`^(0|-?[1-9][0-9]*|-?(0|[1-9][0-9]*)\.[0-9]*[1-9]|-?[1-9](\.[0-9]*[1-9])?e[+-][1-9][0-9]*)$`)

// TestNumberRoundTrip checks on random doubles that the output has the
// ECMAScript shape, parses back to the same value, uses an exponent exactly
// where ECMAScript does, and has no more digits than strconv's shortest form.
func TestNumberRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 200000 {
		var f float64
		switch i % 3 {
		case 0: // any bit pattern
			f = math.Float64frombits(r.Uint64())
		case 1: // around the layout thresholds
			f = float64(r.IntN(1000)) * math.Pow10(r.IntN(60)-30)
		default: // integers near 2^53
			f = float64(r.Int64N(1 << 60))
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		got := string(appendNumber(nil, f))
		if !esNumber.MatchString(got) {
			t.Fatalf("appendNumber(%v) = %q, not in ECMAScript form", f, got)
		}
		back, err := strconv.ParseFloat(got, 64)
		if err != nil || back != f {
			t.Fatalf("appendNumber(%v) = %q, which parses as %v, %v", f, got, back, err)
		}
		abs := math.Abs(f)
		hasExp := strings.Contains(got, "e")
		wantExp := abs != 0 && (abs >= 1e21 || abs < 1e-6)
		if hasExp != wantExp {
			t.Fatalf("appendNumber(%v) = %q: exponent %v, want %v", f, got, hasExp, wantExp)
		}
	}
}

// TestIntegerFastPath checks that integer literals, which skip the float
// conversion when short, come out as the conversion would write them.
func TestIntegerFastPath(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 100000 {
		digits := 1 + r.IntN(22)
		lit := []byte(strconv.FormatUint(1+r.Uint64N(9), 10))
		for len(lit) < digits {
			lit = append(lit, byte('0'+r.IntN(10)))
		}
		if r.IntN(2) == 0 {
			lit = append([]byte{'-'}, lit...)
		}
		f, err := strconv.ParseFloat(string(lit), 64)
		if err != nil {
			t.Fatal(err)
		}
		want := string(appendNumber(nil, f))
		got, err := Canonicalize(lit, Limits{})
		if err != nil || string(got) != want {
			t.Fatalf("Canonicalize(%s) = %s, %v; want %s", lit, got, err, want)
		}
	}
}

func BenchmarkAppendNumber(b *testing.B) {
	values := []float64{0, 1, 4.5, 123456789, 0.1, 1e21, 1.5e-7, 5e-324, 1.7976931348623157e308}
	var buf []byte
	for b.Loop() {
		for _, v := range values {
			buf = appendNumber(buf[:0], v)
		}
	}
}
