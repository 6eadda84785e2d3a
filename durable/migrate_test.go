package durable_test

import (
	"path/filepath"
	"sync"
	"testing"

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
