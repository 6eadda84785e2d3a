package main

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
)

// TestSQLiteNewFileOpenedAtOnce: several proxies started at the same
// moment on a database file that does not exist yet all open it. The
// first connection to a new file switches it to WAL, which SQLite may
// refuse at once with "database is locked" to another connection doing
// the same, whatever busy_timeout says; the open is tried again instead
// of failing the start-up.
func TestSQLiteNewFileOpenedAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	const rounds, opens = 60, 4
	for r := range rounds {
		dsn := "sqlite:" + filepath.Join(dir, fmt.Sprintf("new-%d.db", r))
		var wg sync.WaitGroup
		errs := make([]error, opens)
		for i := range opens {
			wg.Go(func() {
				st, err := openStore(ctx, dsn, storeOpts{})
				if err == nil {
					err = st.migrate(ctx)
					st.close()
				}
				errs[i] = err
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d: open %d of %d at once of a new file: %v", r, i, opens, err)
			}
		}
	}
}
