package pgstorable

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
)

// refEscapes is a second reading of the \u escapes of b, valid JSON, that
// follows strings from quote to quote: whether jsonb takes them all (no
// \u0000, every surrogate escape in a high-low pair).
func refEscapes(b []byte) bool {
	in := false
	for i := 0; i < len(b); i++ {
		switch {
		case b[i] == '"':
			in = !in
		case in && b[i] == '\\':
			i++
			if b[i] != 'u' {
				continue
			}
			r, _ := strconv.ParseUint(string(b[i+1:i+5]), 16, 32)
			i += 4
			switch {
			case r == 0, 0xDC00 <= r && r <= 0xDFFF:
				return false
			case 0xD800 <= r && r <= 0xDBFF:
				if !bytes.HasPrefix(b[i+1:], []byte(`\u`)) {
					return false
				}
				lo, _ := strconv.ParseUint(string(b[i+3:i+7]), 16, 32)
				if lo < 0xDC00 || lo > 0xDFFF {
					return false
				}
				i += 6
			}
		}
	}
	return true
}

// refNumbers checks every number of b, valid JSON, as encoding/json's
// tokenizer finds them, with Number.
func refNumbers(b []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return true
		}
		if err != nil {
			panic(err) // b is valid JSON
		}
		if n, ok := tok.(json.Number); ok && Number([]byte(n)) != nil {
			return false
		}
	}
}

// FuzzJSONB checks that JSONB, which finds escapes and numbers by glancing
// at bytes, refuses a valid JSON document exactly when a reading that
// follows its strings finds a \u0000 or lone surrogate escape, or
// encoding/json's tokenizer finds a number Number refuses. The fuzzer's
// document is tried as it is, and its text s and number num inside a
// document.
func FuzzJSONB(f *testing.F) {
	for i, doc := range []string{
		`{"a":"b"}`, `"a\\u0000"`, `"\u00e9\n\"\\"`, `"\ud83d\ude00"`, `"a\u0000b"`, `["\ud800"]`, `"\ud800\u0041"`, `"\udc00"`,
		`{"\u0000":1}`, `"\\\u0000"`, `"\ud800\\u0041"`, `"truncated\ud800"`, `"escaped quote \" ok"`,
		`{"a":[1,2,{"b":1e131072}]}`, `[1e-16384]`, `{"a":"1e131072","1e-16384":"x"}`, `{"a":"quote \" 1e131072 \\","b":1}`,
		`{"a":"\\","b":1e131072}`, `[1.5e3, -2E-2, 0]`, `"\uD800\uDC00"`, `"\uDBFF\uDFFF"`, `"\ud800\ud800"`,
	} {
		nums := []string{"0", "1e131072", "-0.5", "1e-16384", "0.0e-16383", "123.456e131070", "1E+131071"}
		f.Add([]byte(doc), doc, nums[i%len(nums)])
	}
	f.Fuzz(func(t *testing.T, doc []byte, s, num string) {
		for _, b := range [][]byte{doc, []byte(`["` + s + `"]`), []byte(`{"` + s + `":[` + num + `]}`), []byte(num)} {
			if !json.Valid(b) || !utf8.Valid(b) {
				continue
			}
			want := refEscapes(b) && refNumbers(b)
			if err := JSONB(b); (err == nil) != want {
				t.Fatalf("JSONB(%q) = %v, want stored %v", b, err, want)
			}
		}
	})
}

// FuzzNumber checks Number against the documented rule, computed from the
// number's digits as a decimal (see numberModel), and checks that moving
// the decimal point left and raising the exponent to match, which changes
// neither the value nor the scale as written, never changes the verdict.
func FuzzNumber(f *testing.F) {
	for num := range numberCases {
		f.Add(num, uint8(1))
	}
	f.Add("1e1073741823", uint8(1))
	f.Add("0e-1073741824", uint8(0))
	f.Add("12345.6e131068", uint8(4))
	f.Fuzz(func(t *testing.T, num string, k uint8) {
		if len(num) == 0 || num[0] != '-' && (num[0] < '0' || num[0] > '9') || !json.Valid([]byte(num)) || strings.ContainsAny(num, " \t\r\n") {
			return // not a JSON number
		}
		n := strings.TrimPrefix(num, "-")
		mant, exp := n, int64(0)
		if i := strings.IndexAny(n, "eE"); i >= 0 {
			mant = n[:i]
			e, err := strconv.ParseInt(strings.TrimPrefix(n[i+1:], "+"), 10, 64)
			if err != nil || e > 1<<40 || e < -(1<<40) {
				return // beyond what the model computes with
			}
			exp = e
		}
		ip, frac, _ := strings.Cut(mant, ".")
		verdict := Number([]byte(num)) == nil
		if want := numberModel(ip, frac, exp); verdict != want {
			t.Fatalf("Number(%s) stored %v; the documented rule says %v", num, verdict, want)
		}
		if ip == "0" {
			return
		}
		shift := 1 + int(k)%len(ip)
		head := ip[:len(ip)-shift]
		if head == "" {
			head = "0"
		}
		alt := head + "." + ip[len(ip)-shift:] + frac + "e" + strconv.FormatInt(exp+int64(shift), 10)
		if got := Number([]byte(alt)) == nil; got != verdict {
			t.Fatalf("Number(%s) stored %v, Number(%s) %v", num, verdict, alt, got)
		}
	})
}

// numberModel is the documented rule: a number 0.D × 10^E, where D are its
// significant digits, written with exponent x, is stored when |x| is below
// 1073741823, its scale as written (fraction digits less x) is at most
// 16383 and, unless it is zero, E is at most 131072.
func numberModel(ip, frac string, exp int64) bool {
	if exp >= 1<<30-1 || exp <= -(1<<30-1) {
		return false // as PostgreSQL reads it, an exponent of INT_MAX/2 overflows whatever the digits
	}
	if int64(len(frac))-exp > maxScale {
		return false
	}
	digits := ip + frac
	sig := strings.TrimLeft(digits, "0")
	if sig == "" {
		return true
	}
	e := int64(len(ip)) - int64(len(digits)-len(sig)) + exp // 0.sig × 10^e
	return e <= maxIntDigits
}

// FuzzText checks that Text refuses exactly text that is not valid UTF-8
// or holds a NUL, and that CleanText makes any text storable, leaving
// storable text as it is and replacing only NULs and invalid bytes, each
// with one U+FFFD.
func FuzzText(f *testing.F) {
	for _, s := range []string{"", "clé", "a\x00b", "a\xffb", "a\x00b\xff\xfec", "\xed\xa0\x80", "\uFFFD", "\xf4\x90\x80\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ok := utf8.ValidString(s) && !strings.Contains(s, "\x00")
		if (Text(s) == nil) != ok {
			t.Fatalf("Text(%q) = %v, want storable %v", s, Text(s), ok)
		}
		c := CleanText(s)
		if Text(c) != nil || ok && c != s {
			t.Fatalf("CleanText(%q) = %q", s, c)
		}
		var want strings.Builder
		for i := 0; i < len(s); {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == 0 {
				r = utf8.RuneError
			}
			want.WriteRune(r)
			i += size
		}
		if c != want.String() {
			t.Fatalf("CleanText(%q) = %q, want %q", s, c, want.String())
		}
	})
}

// FuzzNumberPostgres checks Number's verdicts against PostgreSQL's own
// (SELECT $1::jsonb) when TEST_DATABASE_URL names a server, and is skipped
// otherwise.
func FuzzNumberPostgres(f *testing.F) {
	for num := range numberCases {
		f.Add(num)
	}
	for _, num := range []string{"0e1073741823", "0e1073741822", "0e-1073741823", "1e1073741824", "0.0e1000000000", "-0e99999999999"} {
		f.Add(num)
	}
	url := os.Getenv("TEST_DATABASE_URL")
	if url == "" {
		f.Skip("TEST_DATABASE_URL not set")
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { conn.Close(ctx) })
	f.Fuzz(func(t *testing.T, num string) {
		if !json.Valid([]byte(num)) || len(num) == 0 || num[0] != '-' && (num[0] < '0' || num[0] > '9') || strings.ContainsAny(num, " \t\r\n") {
			return
		}
		var s string
		pgErr := conn.QueryRow(ctx, "SELECT $1::jsonb::text", num).Scan(&s)
		if err := Number([]byte(num)); (err == nil) != (pgErr == nil) {
			t.Fatalf("%s: Number says %v, PostgreSQL says %v", num, err, pgErr)
		}
	})
}
