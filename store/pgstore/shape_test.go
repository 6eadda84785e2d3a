package pgstore_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/internal/pgtest"
	"github.com/idemgo/idem/store/pgstore"
)

// TestMigrateRefusesATableOfAnotherShape: Migrate on a database where a
// table of that name was made by something else, with some of the store's
// columns (those of its index) but not all, fails naming the table,
// instead of succeeding and leaving every later call to fail; the table is
// left as it was.
func TestMigrateRefusesATableOfAnotherShape(t *testing.T) {
	ctx := ctxT(t)
	pool := newPool(t, pgtest.URL(t))
	if _, err := pool.Exec(ctx, `CREATE TABLE other_shape (namespace text, expires_at timestamptz, note text)`); err != nil {
		t.Fatal(err)
	}
	s, err := pgstore.New(pool, pgstore.Config{Table: "other_shape"})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Migrate(ctx)
	if !errors.Is(err, idem.ErrUnavailable) || !strings.Contains(err.Error(), "other_shape") || !strings.Contains(err.Error(), "columns") {
		t.Fatalf("Migrate over a table of another shape: %v; want ErrUnavailable naming the table and its columns", err)
	}
	var indexes int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_indexes WHERE tablename = 'other_shape'`).Scan(&indexes); err != nil || indexes != 0 {
		t.Errorf("indexes on the table after the failed Migrate: %d, %v; want none", indexes, err)
	}
}
