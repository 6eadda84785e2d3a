package sqlitestore_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
)

// TestUnmigratedSaysMigrate: a store used before Migrate made its table
// fails each call with ErrUnavailable (the schema may yet arrive, as in a
// deployment whose migration runs after the service started) and says
// what to do, rather than only the driver's "no such table".
func TestUnmigratedSaysMigrate(t *testing.T) {
	for _, batch := range []bool{false, true} {
		db := openDB(t, filepath.Join(t.TempDir(), "idem.db"), dsnParams, 4)
		s := newStoreBatch(t, db, nil, batch)
		ctx := context.Background()
		k := mustKey(t, idem.MustNamespace("t"), "k")
		_, beginErr := s.Begin(ctx, k, mustRequest(t, `{}`), nil)
		_, getErr := s.Get(ctx, k)
		_, purgeErr := s.PurgeExpired(ctx, k.Namespace(), time.Now())
		for op, err := range map[string]error{"Begin": beginErr, "Get": getErr, "PurgeExpired": purgeErr} {
			if !errors.Is(err, idem.ErrUnavailable) || !strings.Contains(err.Error(), "Migrate") {
				t.Errorf("batch %v: %s on an unmigrated database: %v; want ErrUnavailable naming Migrate", batch, op, err)
			}
		}
	}
}

// TestMigrateRefusesATableOfAnotherShape: Migrate on a database whose table
// of that name was made by something else (other columns, or no primary
// key on the record's key) fails, naming the table, instead of succeeding
// and leaving every later call to fail; the table is left as it was.
func TestMigrateRefusesATableOfAnotherShape(t *testing.T) {
	for name, ddl := range map[string]string{
		"OtherColumns": `CREATE TABLE idempotency_record (namespace TEXT, expires_at INTEGER, note TEXT)`,
		"NoPrimaryKey": `CREATE TABLE idempotency_record (namespace TEXT, scope TEXT, key_value TEXT,
			request_hash BLOB, request_payload TEXT, status TEXT, result_payload TEXT, error_payload TEXT,
			owner_token TEXT, fence INTEGER, created_at INTEGER, expires_at INTEGER, lease_expires_at INTEGER)`,
	} {
		t.Run(name, func(t *testing.T) {
			db := openDB(t, filepath.Join(t.TempDir(), "idem.db"), dsnParams, 1)
			if _, err := db.Exec(ddl); err != nil {
				t.Fatal(err)
			}
			err := newStore(t, db, nil).Migrate(context.Background())
			if !errors.Is(err, idem.ErrUnavailable) || !strings.Contains(err.Error(), `"idempotency_record"`) {
				t.Fatalf("Migrate over a table of another shape: %v; want ErrUnavailable naming the table", err)
			}
			var indexes int
			if err := db.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'idempotency_record'`).Scan(&indexes); err != nil || indexes != 0 {
				t.Errorf("indexes on the table after the failed Migrate: %d, %v; want none", indexes, err)
			}
		})
	}
}

// TestMigrateRefusesAReadOnlyDatabase: Migrate on a database the store
// cannot write (a read-only file or mount, opened read-only) fails with
// ErrUnavailable naming the cause, even when the table is there already,
// instead of succeeding and leaving every Begin and settle call to fail.
func TestMigrateRefusesAReadOnlyDatabase(t *testing.T) {
	db, path := newDB(t, 1)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	ro := openDB(t, "file:"+path, dsnParams+"&mode=ro", 1)
	err := newStore(t, ro, nil).Migrate(context.Background())
	if !errors.Is(err, idem.ErrUnavailable) || !strings.Contains(err.Error(), "readonly") {
		t.Fatalf("Migrate on a read-only database: %v; want ErrUnavailable saying it is read-only", err)
	}
}
