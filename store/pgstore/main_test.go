package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/idemgo/idem/internal/pgtest"
	"github.com/idemgo/idem/store/pgstore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(pgtest.Wrap(m)) }

// testBundle is what a test gets from setup: a pool on a fresh schema of
// the shared test server, and a migrated store on it.
type testBundle struct {
	url   string
	pool  *pgxpool.Pool
	store *pgstore.Store
}

// setup gives t a fresh schema, a pool on it and a migrated store with
// cfg (Table defaults as usual).
func setup(t *testing.T, cfg pgstore.Config) *testBundle {
	t.Helper()
	url := pgtest.URL(t)
	pool := newPool(t, url)
	s, err := pgstore.New(pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctxT(t)); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return &testBundle{url: url, pool: pool, store: s}
}

// newPool opens a pool on url, closed when t ends.
func newPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	// Transactional tests hold several connections at once each.
	pc.MaxConns = 24
	pool, err := pgxpool.NewWithConfig(ctxT(t), pc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// ctxT returns a context that ends with t, or after a minute.
func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}
