package pgstorable

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
)

// renderedCases are numbers, each printed back from jsonb as PostgreSQL
// prints it: RenderedSize counts them to the byte.
var renderedCases = []string{
	"0", "7", "-7", "12.50", "0.001", "-0.001",
	"1e0", "1E5", "1e+5", "-1e5", "2.5e3", "2.5e-3", "2.50e1", "0.005e3", "-0.0e1", "-0e3",
	"1e-5", "123.456e-2", "0e10", "0.0e-5", "1e131071", "1e-16383", "-9.99e100",
}

// TestRenderedSizeOfNumbersMatchesPostgreSQL checks RenderedSize's count
// of each number against the length PostgreSQL prints it at, when
// TEST_DATABASE_URL names a server (make test starts one).
func TestRenderedSizeOfNumbersMatchesPostgreSQL(t *testing.T) {
	url := os.Getenv("TEST_DATABASE_URL")
	if url == "" {
		t.Skip("TEST_DATABASE_URL not set")
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, num := range renderedCases {
		var want int
		if err := conn.QueryRow(ctx, `SELECT octet_length($1::jsonb::text)`, num).Scan(&want); err != nil {
			t.Fatalf("%s: %v", num, err)
		}
		if got := RenderedSize([]byte(num)); got != want {
			t.Errorf("RenderedSize(%s) = %d, PostgreSQL prints %d bytes", num, got, want)
		}
	}
}

// TestRenderedSize: strings, keys and literals count as written, e or
// not, and a document's numbers add up.
func TestRenderedSize(t *testing.T) {
	for doc, want := range map[string]int{
		`["1e9", "a\"1e9"]`:                     len(`["1e9", "a\"1e9"]`),
		`{"name":"free","true":true,"f":false}`: len(`{"name":"free","true":true,"f":false}`),
		`{"id":"3e8","e":2}`:                    len(`{"id":"3e8","e":2}`),
		`{"amount":1.5e3}`:                      len(`{"amount":}`) + len("1500"),
		`["1e5",1e5,"\"",1E5]`:                  len(`["1e5",,"\"",]`) + 2*len("100000"),
		`[1e131071,-1e-3]`:                      len(`[,]`) + 131072 + len("-0.001"),
		`1e131071`:                              131072,
	} {
		if got := RenderedSize([]byte(doc)); got != want {
			t.Errorf("RenderedSize(%s) = %d, want %d", doc, got, want)
		}
	}
	many := []byte("[" + strings.Repeat("1e131071,", 20000) + "0]") // 2.6 GB as printed
	if got := RenderedSize(many); got != MaxRenderedSize {
		t.Errorf("RenderedSize of 20000 × 1e131071 = %d, want MaxRenderedSize", got)
	}
}

// FuzzRenderedSize checks RenderedSize, which finds numbers by glancing
// at bytes, against a count over the numbers encoding/json's tokenizer
// finds: each with an exponent at numericLength, the rest as written.
func FuzzRenderedSize(f *testing.F) {
	for _, doc := range []string{
		`{"amount":1.5e3}`, `["1e5",1e5,"\"",1E5]`, `{"id":"3e8","e":2,"t":true}`, `[1e131071,-1e-3]`,
		`{"a":"quote \" 1e5 \\","b":2E+2}`, `[0.0e-5, -0e3, 12.50]`, `"1e9"`, `-9.99e100`,
	} {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		if !json.Valid(doc) || !utf8.Valid(doc) || JSONB(doc) != nil {
			return
		}
		want := len(doc)
		dec := json.NewDecoder(bytes.NewReader(doc))
		dec.UseNumber()
		for {
			tok, err := dec.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err) // doc is valid JSON
			}
			if n, ok := tok.(json.Number); ok && strings.ContainsAny(string(n), "eE") {
				want += numericLength(string(n)) - len(n)
			}
		}
		if got := RenderedSize(doc); got != min(want, MaxRenderedSize) {
			t.Fatalf("RenderedSize(%q) = %d, want %d", doc, got, want)
		}
	})
}
