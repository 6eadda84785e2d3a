package sqlitestore_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
)

// TestConformance runs the shared suite on a WAL database file, once with a
// pool of connections (lease mode and transactional mode) and once with the
// single connection recommended for lease mode alone.
func TestConformance(t *testing.T) {
	t.Run("Pool", func(t *testing.T) {
		// The transactional cases hold a write transaction and meanwhile
		// read through the pool (to check that the record is not yet
		// visible), while other cases' writers each hold a connection as
		// they wait for the write lock: with fewer connections than
		// concurrent writers (up to 32 here) the read waits behind them
		// until their busy timeout, the deadlock the package doc
		// describes under "Connections".
		db, _ := newDB(t, 64)
		idemtest.Exercise(t, idemtest.Harness{
			NewStore: func(t *testing.T, now func() time.Time) idem.Store {
				return newStore(t, db, now)
			},
			NewTx: func(t *testing.T, now func() time.Time) (idem.Store, func() error, func() error) {
				tx, err := db.BeginTx(context.Background(), nil)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = tx.Rollback() })
				return newStore(t, db, now).WithTx(tx), tx.Commit, tx.Rollback
			},
			MaxPayload:   1 << 16,
			SingleWriter: true,
			// SQLite's "unreachable": a database file in a directory
			// that does not exist, which cannot be opened.
			NewUnreachableStore: func(t *testing.T) idem.Store {
				path := filepath.Join(t.TempDir(), "missing", "idem.db")
				return newStore(t, openDB(t, path, dsnParams, 1), time.Now)
			},
		})
	})
	t.Run("OneConnection", func(t *testing.T) {
		db, _ := newDB(t, 1)
		idemtest.Exercise(t, idemtest.Harness{
			NewStore: func(t *testing.T, now func() time.Time) idem.Store {
				return newStore(t, db, now)
			},
			MaxPayload: 1 << 16,
		})
	})
	// Config.Batch: the 32 concurrent Begins of the suite and its other
	// concurrent calls go through shared transactions.
	t.Run("Batch", func(t *testing.T) {
		db, _ := newDB(t, 4)
		idemtest.Exercise(t, idemtest.Harness{
			NewStore: func(t *testing.T, now func() time.Time) idem.Store {
				return newStoreBatch(t, db, now, true)
			},
			MaxPayload:   1 << 16,
			SingleWriter: true,
			NewUnreachableStore: func(t *testing.T) idem.Store {
				path := filepath.Join(t.TempDir(), "missing", "idem.db")
				return newStoreBatch(t, openDB(t, path, dsnParams, 1), time.Now, true)
			},
		})
	})
}
