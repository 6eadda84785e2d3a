package pgstore_test

import (
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem/internal/pgtest"
	"github.com/idemgo/idem/store/pgstore"
)

// TestConformanceExecModes runs the store contract on pools whose
// connections use each of pgx's query execution modes, as a pool behind a
// transaction-pooling proxy is configured (simple protocol, or exec
// without prepared statements).
func TestConformanceExecModes(t *testing.T) {
	modes := map[string]pgx.QueryExecMode{
		"cache_describe": pgx.QueryExecModeCacheDescribe,
		"describe_exec":  pgx.QueryExecModeDescribeExec,
		"exec":           pgx.QueryExecModeExec,
		"simple":         pgx.QueryExecModeSimpleProtocol,
	}
	for name, mode := range modes {
		t.Run(name, func(t *testing.T) {
			url := pgtest.URL(t)
			pc, err := pgxpool.ParseConfig(url)
			if err != nil {
				t.Fatal(err)
			}
			pc.ConnConfig.DefaultQueryExecMode = mode
			pc.MaxConns = 24
			pool, err := pgxpool.NewWithConfig(ctxT(t), pc)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			m, err := pgstore.New(pool, pgstore.Config{})
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Migrate(ctxT(t)); err != nil {
				t.Fatalf("Migrate: %v", err)
			}
			exercisePool(t, pool)
		})
	}
}
