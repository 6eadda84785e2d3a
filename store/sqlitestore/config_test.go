package sqlitestore_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
	"github.com/idemgo/idem/store/sqlitestore"
)

func TestNewValidates(t *testing.T) {
	t.Parallel()
	db := &sql.DB{} // never used: New does no I/O
	for _, tc := range []struct {
		name string
		cfg  sqlitestore.Config
		want string // in the error; "" means valid
	}{
		{"Zero", sqlitestore.Config{}, ""},
		{"Table", sqlitestore.Config{Table: "Idem_Records2"}, ""},
		{"TableKeyword", sqlitestore.Config{Table: "order"}, ""},
		{"TableLeadingDigit", sqlitestore.Config{Table: "1records"}, "Config.Table"},
		{"TableQuote", sqlitestore.Config{Table: `a"b`}, "Config.Table"},
		{"TableDot", sqlitestore.Config{Table: "main.records"}, "Config.Table"},
		{"TableSpace", sqlitestore.Config{Table: "a b"}, "Config.Table"},
		{"TableReserved", sqlitestore.Config{Table: "SQLite_master"}, "Config.Table"},
		{"TableTooLong", sqlitestore.Config{Table: strings.Repeat("t", 49)}, "Config.Table"},
		{"NegativeRetention", sqlitestore.Config{Retention: -1}, "Config.Retention"},
		{"NegativeLease", sqlitestore.Config{Lease: -1}, "Config.Lease"},
		{"NegativeMaxPayload", sqlitestore.Config{MaxPayload: -1}, "Config.MaxPayload"},
		{"MaxMaxPayload", sqlitestore.Config{MaxPayload: sqlitestore.MaxMaxPayload}, ""},
		{"MaxPayloadBeyondARow", sqlitestore.Config{MaxPayload: sqlitestore.MaxMaxPayload + 1}, "Config.MaxPayload"},
		{"MaxPayloadGiB", sqlitestore.Config{MaxPayload: 1 << 30}, "Config.MaxPayload"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := sqlitestore.New(db, tc.cfg)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("New: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("New: %v, want an error naming %s", err, tc.want)
			}
		})
	}
	if _, err := sqlitestore.New(nil, sqlitestore.Config{}); err == nil {
		t.Error("New(nil) succeeded")
	}
}

func TestMigrationSQL(t *testing.T) {
	t.Parallel()
	def, err := sqlitestore.MigrationSQL("")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`CREATE TABLE IF NOT EXISTS "idempotency_record"`,
		`PRIMARY KEY (namespace, scope, key_value)`,
		`CREATE INDEX IF NOT EXISTS "idempotency_record_expires_idx" ON "idempotency_record" (namespace, expires_at)`,
	} {
		if !strings.Contains(def, want) {
			t.Errorf("MigrationSQL(\"\") lacks %q:\n%s", want, def)
		}
	}
	custom, err := sqlitestore.MigrationSQL("Order")
	if err != nil || !strings.Contains(custom, `"Order"`) || strings.Contains(custom, "{{") || strings.Contains(custom, "idempotency_record") {
		t.Errorf("MigrationSQL(\"Order\") = %v\n%s", err, custom)
	}
	if _, err := sqlitestore.MigrationSQL("x; DROP TABLE y"); err == nil {
		t.Error("MigrationSQL accepted an injection")
	}
}

// TestMigrateCustomTable: Migrate is idempotent, a table named after a
// keyword works, and stores on different tables are independent.
func TestMigrateCustomTable(t *testing.T) {
	t.Parallel()
	db, _ := newDB(t, 2)
	ctx := context.Background()
	custom, err := sqlitestore.New(db, sqlitestore.Config{Table: "Order"})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := custom.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
	}
	k := mustKey(t, idemtest.RandomNamespace(t), "k")
	r := mustRequest(t, `{}`)
	o := mustBegin(t, custom, k, r, idem.Fresh)
	if err := custom.Commit(ctx, k, o.Lease, []byte(`"custom"`)); err != nil {
		t.Fatal(err)
	}
	mustBegin(t, newStore(t, db, nil), k, r, idem.Fresh) // the default table does not see it
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM "Order"`).Scan(&n); err != nil || n != 1 {
		t.Errorf(`rows in "Order" = %d, %v; want 1`, n, err)
	}
}

// TestMaxMaxPayloadFitsARow: a record holds its request payload and its
// result (or stored error) in one row, which SQLite caps at
// SQLITE_LIMIT_LENGTH bytes; a row of two MaxMaxPayload payloads, the
// longest key and the other columns fits in the driver's limit, so a
// payload that Config.MaxPayload admits is never refused by SQLite as too
// big (SQLITE_TOOBIG, which the caller would see as idem.ErrUnavailable).
func TestMaxMaxPayloadFitsARow(t *testing.T) {
	t.Parallel()
	db, _ := newDB(t, 1)
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	limit, err := sqlite.Limit(conn, sqlite3.SQLITE_LIMIT_LENGTH, -1) // -1: read, change nothing
	if err != nil {
		t.Fatal(err)
	}
	// Every column but the payloads, at its longest, with a generous
	// allowance for the row's header and integers.
	others := idem.MaxNamespaceLen + idem.MaxScopeLen + idem.MaxKeyLen + 64 /* fingerprint */ + idem.TokenLen + len("failed_permanent") + 128
	if row := 2*sqlitestore.MaxMaxPayload + others; row > limit {
		t.Errorf("a row of two MaxMaxPayload payloads is %d bytes, beyond SQLITE_LIMIT_LENGTH (%d)", row, limit)
	}
}
