package pgstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
	"github.com/idemgo/idem/internal/testserver"
	"github.com/idemgo/idem/store/pgstore"
)

const maxPayload = 1 << 16

// conformanceConfig is the configuration idemtest requires.
func conformanceConfig(now func() time.Time) pgstore.Config {
	return pgstore.Config{Now: now, Retention: idemtest.Retention, Lease: idemtest.Lease, MaxPayload: maxPayload}
}

// TestConformance runs the store contract in lease mode (the Store on its
// pool) and in transactional mode bound to pgx transactions (WithTx).
func TestConformance(t *testing.T) {
	exercisePool(t, setup(t, pgstore.Config{}).pool)
}

// exercisePool runs the store contract on pool, migrated already: in lease
// mode (the Store on pool) and in transactional mode bound to pgx
// transactions of pool (WithTx).
func exercisePool(t *testing.T, pool *pgxpool.Pool) {
	newStore := func(t *testing.T, now func() time.Time) *pgstore.Store {
		s, err := pgstore.New(pool, conformanceConfig(now))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	idemtest.Exercise(t, idemtest.Harness{
		NewStore: func(t *testing.T, now func() time.Time) idem.Store { return newStore(t, now) },
		NewTx: func(t *testing.T, now func() time.Time) (idem.Store, func() error, func() error) {
			ctx := context.Background()
			tx, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = tx.Rollback(ctx) })
			return newStore(t, now).WithTx(tx),
				func() error { return tx.Commit(ctx) },
				func() error { return tx.Rollback(ctx) }
		},
		MaxPayload:          maxPayload,
		NewUnreachableStore: unreachableStore,
	})
}

// TestConformancePipeline runs the lease-mode cases on a Store with
// Config.Pipeline, with batches small enough that the suite's 32
// concurrent Begins span several batches and lanes.
func TestConformancePipeline(t *testing.T) {
	tb := setup(t, pgstore.Config{})
	pipelined := func(now func() time.Time) pgstore.Config {
		c := conformanceConfig(now)
		c.Pipeline, c.PipelineLanes, c.PipelineDepth = true, 2, 4
		return c
	}
	idemtest.Exercise(t, idemtest.Harness{
		NewStore: func(t *testing.T, now func() time.Time) idem.Store {
			s, err := pgstore.New(tb.pool, pipelined(now))
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		MaxPayload: maxPayload,
		NewUnreachableStore: func(t *testing.T) idem.Store {
			return storeOnClosedPort(t, pipelined(time.Now))
		},
	})
}

// unreachableStore is a store on a pool whose server address is a closed
// loopback port.
func unreachableStore(t *testing.T) idem.Store {
	return storeOnClosedPort(t, conformanceConfig(time.Now))
}

// storeOnClosedPort is a store configured by cfg on a pool whose server
// address is a closed loopback port.
func storeOnClosedPort(t *testing.T, cfg pgstore.Config) idem.Store {
	port, err := testserver.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(context.Background(), fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?connect_timeout=2", port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s, err := pgstore.New(pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestConformanceSQLTx runs the transactional-mode cases on database/sql
// transactions (WithSQLTx, through pgx's stdlib driver); the lease-mode
// cases run on a Store made without a pool's help for reading back.
func TestConformanceSQLTx(t *testing.T) {
	tb := setup(t, pgstore.Config{})
	db := stdlib.OpenDBFromPool(tb.pool)
	t.Cleanup(func() { _ = db.Close() })
	newStore := func(t *testing.T, now func() time.Time) *pgstore.Store {
		s, err := pgstore.New(tb.pool, conformanceConfig(now))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	idemtest.Exercise(t, idemtest.Harness{
		NewStore: func(t *testing.T, now func() time.Time) idem.Store { return newStore(t, now) },
		NewTx: func(t *testing.T, now func() time.Time) (idem.Store, func() error, func() error) {
			tx, err := db.BeginTx(context.Background(), &sql.TxOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = tx.Rollback() })
			return newStore(t, now).WithSQLTx(tx), tx.Commit, tx.Rollback
		},
		MaxPayload: maxPayload,
	})
}
