package durable

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem/internal/pgtest"
)

// renderedSize counts a number at the length PostgreSQL prints it back
// from jsonb, exponents spelled out in digits, to the byte.
func TestRenderedSizeOfNumbersMatchesPostgreSQL(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := pgxpool.New(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	for _, num := range []string{
		"0", "7", "-7", "12.50", "0.001", "-0.001",
		"1e0", "1E5", "1e+5", "-1e5", "2.5e3", "2.5e-3", "2.50e1", "0.005e3", "-0.0e1", "-0e3",
		"1e-5", "123.456e-2", "0e10", "0.0e-5", "1e131071", "1e-16383", "-9.99e100",
	} {
		var want int
		if err := pool.QueryRow(ctx, `SELECT octet_length($1::jsonb::text)`, num).Scan(&want); err != nil {
			t.Fatalf("%s: %v", num, err)
		}
		if got := renderedSize([]byte(num)); got != want {
			t.Errorf("renderedSize(%s) = %d, PostgreSQL prints %d bytes", num, got, want)
		}
	}
	// Strings are their own length, "e" or not.
	if doc := `["1e9", "a\"1e9"]`; renderedSize([]byte(doc)) != len(doc) {
		t.Errorf("renderedSize(%s) = %d, want %d", doc, renderedSize([]byte(doc)), len(doc))
	}
}
