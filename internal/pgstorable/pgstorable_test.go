package pgstorable

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestJSONB(t *testing.T) {
	for doc, want := range map[string]string{
		`{"a":"b"}`:             "",
		`"a\\u0000"`:            "", // an escaped backslash, then the text u0000
		`"\u00e9\n\"\\"`:        "",
		`"\ud83d\ude00"`:        "", // a pair
		`"a\u0000b"`:            `\u0000`,
		`["\ud800"]`:            "lone high",
		`"\ud800\u0041"`:        "lone high",
		`"\udc00"`:              "lone low",
		`{"\u0000":1}`:          `\u0000`,
		`"\\\u0000"`:            `\u0000`, // an escaped backslash, then the escape
		`"\ud800\\u0041"`:       "lone high",
		`"truncated\ud800"`:     "lone high",
		`"escaped quote \" ok"`: "",
	} {
		err := JSONB([]byte(doc))
		switch {
		case want == "" && err != nil:
			t.Errorf("JSONB(%s) = %v, want nil", doc, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("JSONB(%s) = %v, want an error naming %q", doc, err, want)
		}
	}
}

func TestText(t *testing.T) {
	for s, ok := range map[string]bool{"": true, "clé": true, "a\x00b": false, "a\xffb": false} {
		if err := Text(s); (err == nil) != ok {
			t.Errorf("Text(%q) = %v", s, err)
		}
		c := CleanText(s)
		if Text(c) != nil || (ok && c != s) {
			t.Errorf("CleanText(%q) = %q", s, c)
		}
	}
	if got := CleanText("a\x00b\xff\xfec"); got != "a\uFFFDb\uFFFD\uFFFDc" {
		t.Errorf("CleanText = %q", got)
	}
}

// numberCases are JSON numbers at and past the edges of what jsonb stores,
// with whether it stores them (as PostgreSQL 15 answered).
var numberCases = map[string]bool{
	"0": true, "-0.5": true, "12345678901234567890": true,
	"1e131071": true, "9e131071": true, "1E+131071": true, "10e131070": true, "0.1e131072": true, "123.456e131069": true,
	"1e131072": false, "-1e131072": false, "123.456e131070": false, "1e999999999999": false,
	"0e131072": true, "0.000e131072": true,
	// Found by FuzzNumberPostgres: PostgreSQL refuses an exponent of
	// INT_MAX/2 or more either way, even for zero.
	"0e1073741822": true, "0e1073741823": false, "-0e99999999999": false, "0e-1073741823": false, "0.0e000001073741823": false,
	"1e-16383": true, "12e-16383": true, "1e-16382": true,
	"1e-16384": false, "1.5e-16383": false, "0e-16384": false, "0.0e-16383": false, "1e-999999999999": false,
}

func TestNumber(t *testing.T) {
	for num, ok := range numberCases {
		if err := Number([]byte(num)); (err == nil) != ok {
			t.Errorf("Number(%s) = %v, want stored %v", num, err, ok)
		}
	}
	// In documents: numbers anywhere outside strings count, numbers in
	// strings do not.
	for doc, ok := range map[string]bool{
		`{"a":[1,2,{"b":1e131072}]}`:         false,
		`[1e-16384]`:                         false,
		`{"a":"1e131072","1e-16384":"x"}`:    true,
		`{"a":"quote \" 1e131072 \\","b":1}`: true,
		`{"a":"\\","b":1e131072}`:            false,
		`[1.5e3, -2E-2, 0]`:                  true,
	} {
		if err := JSONB([]byte(doc)); (err == nil) != ok {
			t.Errorf("JSONB(%s) = %v, want stored %v", doc, err, ok)
		}
	}
	long := "0." + strings.Repeat("1", 16384) // no exponent, too many digits
	if err := JSONB([]byte(long)); err == nil {
		t.Errorf("JSONB of a number with 16384 decimals succeeded")
	}
}

// timeCases are times at and past the edges of timestamptz, with whether
// it stores them.
var timeCases = map[time.Time]bool{
	time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC):              true,
	time.Date(294276, 12, 31, 23, 59, 59, 999999000, time.UTC): true,
	time.Date(294277, 1, 1, 0, 0, 0, 0, time.UTC):              false,
	time.Date(-4713, 11, 24, 0, 0, 0, 0, time.UTC):             true,
	time.Date(-4713, 11, 23, 23, 59, 59, 0, time.UTC):          false,
	time.Unix(1<<62, 0): false,
	time.Date(294276, 12, 31, 23, 0, 0, 0, time.FixedZone("east", 3600)): true,
	time.Date(294277, 1, 1, 0, 30, 0, 0, time.FixedZone("east", 3600)):   true,
}

func TestTime(t *testing.T) {
	for tm, ok := range timeCases {
		if err := Time(tm); (err == nil) != ok {
			t.Errorf("Time(%v) = %v, want stored %v", tm, err, ok)
		}
	}
}

// TestNumberAgreesWithPostgres checks Number's verdicts against the
// server's own, when there is one (make test starts one).
func TestNumberAgreesWithPostgres(t *testing.T) {
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
	for num := range numberCases {
		var s string
		pgErr := conn.QueryRow(ctx, "SELECT $1::jsonb::text", num).Scan(&s)
		if err := Number([]byte(num)); (err == nil) != (pgErr == nil) {
			t.Errorf("%s: Number says %v, PostgreSQL says %v", num, err, pgErr)
		}
	}
	for tm := range timeCases {
		if tm.Year() > 300_000 {
			continue // beyond int64 microseconds, which pgx wraps into the range: Time's refusal is the point
		}
		var got time.Time
		pgErr := conn.QueryRow(ctx, "SELECT $1::timestamptz", tm).Scan(&got)
		if err := Time(tm); (err == nil) != (pgErr == nil) {
			t.Errorf("%v: Time says %v, PostgreSQL says %v", tm, err, pgErr)
		}
	}
}

func TestClampTime(t *testing.T) {
	last := time.Date(294276, 12, 31, 23, 59, 59, 999999000, time.UTC)
	for in, want := range map[time.Time]time.Time{
		time.Unix(1<<62, 0):                           last,
		time.Date(294277, 1, 1, 0, 0, 0, 0, time.UTC): last,
		last: last,
		time.Date(-5000, 1, 1, 0, 0, 0, 0, time.UTC): minTime,
		minTime: minTime,
		time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC): time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
	} {
		if got := ClampTime(in); !got.Equal(want) || Time(got) != nil {
			t.Errorf("ClampTime(%v) = %v, want %v", in, got, want)
		}
	}
}
