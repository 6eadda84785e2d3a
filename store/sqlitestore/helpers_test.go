package sqlitestore_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
	"github.com/idemgo/idem/store/sqlitestore"
)

// dsnParams are the parameters the package documentation recommends.
const dsnParams = "?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=foreign_keys(ON)&_pragma=journal_size_limit(16777216)&_txlock=immediate"

// openDB opens path with params, sets the pool size and closes the
// database when the test ends.
func openDB(t testing.TB, path, params string, maxConns int) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path+params)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(maxConns)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// newDB opens a new, migrated database file in t.TempDir() with the
// recommended parameters.
func newDB(t testing.TB, maxConns int) (*sql.DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "idem.db")
	db := openDB(t, path, dsnParams, maxConns)
	migrate(t, db)
	return db, path
}

func migrate(t testing.TB, db *sql.DB) {
	t.Helper()
	s := newStore(t, db, nil)
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// newStore returns a store on db with the suite's settings and clock now
// (time.Now when nil).
func newStore(t testing.TB, db *sql.DB, now func() time.Time) *sqlitestore.Store {
	return newStoreBatch(t, db, now, false)
}

// newStoreBatch is newStore, with Config.Batch when batch.
func newStoreBatch(t testing.TB, db *sql.DB, now func() time.Time, batch bool) *sqlitestore.Store {
	t.Helper()
	s, err := sqlitestore.New(db, sqlitestore.Config{
		Retention: idemtest.Retention, Lease: idemtest.Lease, MaxPayload: 1 << 16, Now: now, Batch: batch,
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustKey(t testing.TB, ns idem.Namespace, v string) idem.Key {
	t.Helper()
	k, err := idem.ParseKey(ns, v)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func mustRequest(t testing.TB, payload string) idem.Request {
	t.Helper()
	r, err := idem.NewRequest([]byte(payload))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func mustBegin(t testing.TB, s idem.Store, k idem.Key, r idem.Request, want idem.Kind) idem.Outcome {
	t.Helper()
	o, err := s.Begin(context.Background(), k, r, nil)
	if err != nil {
		t.Fatalf("Begin(%s): %v", k, err)
	}
	if o.Kind != want {
		t.Fatalf("Begin(%s) = %s, want %s", k, o.Kind, want)
	}
	return o
}
