package durable_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem/durable"
	"github.com/idemgo/idem/internal/pgtest"
)

func TestMigrateIsIdempotentAndConcurrent(t *testing.T) {
	t.Parallel()
	b := setup(t, nil) // migrated once
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			c := newClient(t, newPool(t, b.url), nil, &recorder{})
			errs[i] = c.Migrate(ctxT(t))
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	files, err := filepath.Glob("migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	if n := b.count(t, "SELECT count(*) FROM durable_migration"); n != len(files) {
		t.Fatalf("%d migrations recorded, want %d", n, len(files))
	}
	if sql := durable.MigrationSQL(); len(sql) < 100 {
		t.Fatalf("MigrationSQL: %q", sql)
	}
}

func TestMigrateConcurrentlyOnEmptySchema(t *testing.T) {
	t.Parallel()
	fresh := newPool(t, pgtest.URL(t))
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			c := newClient(t, fresh, nil, &recorder{})
			errs[i] = c.Migrate(ctxT(t))
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestMigrateConcurrentlyUnderRepeatableReadDefault runs two migrations of
// an empty schema one after the other, as two processes do when the second
// waits for the first's advisory lock, on a database whose default
// isolation is REPEATABLE READ: the second's snapshot was taken as it began
// to wait, before the first committed, yet it must see the migrations the
// first recorded and find nothing to do.
func TestMigrateConcurrentlyUnderRepeatableReadDefault(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	holder := &testBundle{url: url, pool: newPool(t, url)}
	poolAs := func(app string) *pgxpool.Pool {
		pc, err := pgxpool.ParseConfig(url)
		if err != nil {
			t.Fatal(err)
		}
		pc.ConnConfig.RuntimeParams["default_transaction_isolation"] = "repeatable read"
		pc.ConnConfig.RuntimeParams["application_name"] = app
		pool, err := pgxpool.NewWithConfig(context.Background(), pc)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		return pool
	}
	suffix := fmt.Sprintf("%d", time.Now().UnixNano())
	firstApp, secondApp := "migrate-first-"+suffix, "migrate-second-"+suffix

	// Hold the migration lock, so that both migrations queue behind it in
	// a known order.
	tx, err := holder.pool.Begin(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctxT(t), "SELECT pg_advisory_xact_lock($1)", durable.MigrateLockID); err != nil {
		t.Fatal(err)
	}
	waiting := func(app string) bool {
		return holder.count(t, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'`, app) == 1
	}
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, app := range []string{firstApp, secondApp} {
		c := newClient(t, poolAs(app), nil, &recorder{})
		wg.Go(func() { errs[i] = c.Migrate(ctxT(t)) })
		waitFor(t, app+" to wait for the migration lock", func() bool { return waiting(app) })
	}
	if err := tx.Commit(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("migration %d: %v", i+1, err)
		}
	}
	files, err := filepath.Glob("migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	if n := holder.count(t, "SELECT count(*) FROM durable_migration"); n != len(files) {
		t.Fatalf("%d migrations recorded, want %d", n, len(files))
	}
}
