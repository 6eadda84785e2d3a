package pgtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DroppablePool returns a pool on the test server (URL), closed when tb
// ends, and drop, which ends every connection the pool has open at the
// server's side (pg_terminate_backend), as a failover or a restarted
// server does, and returns how many it ended; the connections of other
// pools, of this test or others sharing the server, are left alone. drop
// may be called from any goroutine, while tb runs.
func DroppablePool(tb testing.TB) (pool *pgxpool.Pool, drop func() int) {
	tb.Helper()
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(URL(tb))
	if err != nil {
		tb.Fatal(err)
	}
	app := "pgtest_droppable_" + randomHex(8)
	cfg.ConnConfig.RuntimeParams["application_name"] = app
	if pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(pool.Close)
	url := cfg.ConnConfig.ConnString()
	return pool, func() int {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			tb.Errorf("pgtest: dropping the pool's connections: %v", err)
			return 0
		}
		defer conn.Close(ctx)
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n); err != nil {
			tb.Errorf("pgtest: dropping the pool's connections: %v", err)
		}
		return n
	}
}
