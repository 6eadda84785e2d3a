package pgstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	neturl "net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
	"github.com/idemgo/idem/internal/pgtest"
	"github.com/idemgo/idem/store/pgstore"
)

// TestMigrateConcurrentAndIdempotent: many processes' worth of Migrate
// calls at once on an empty schema all succeed, and again afterwards.
func TestMigrateConcurrentAndIdempotent(t *testing.T) {
	url := pgtest.URL(t)
	ctx := ctxT(t)
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each its own pool, as separate processes would have.
			s, err := pgstore.New(newPool(t, url), pgstore.Config{})
			if err == nil {
				err = s.Migrate(ctx)
			}
			if err == nil {
				err = s.Migrate(ctx)
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Migrate %d: %v", i, err)
		}
	}
}

// TestSchema checks the column types the package documentation promises.
func TestSchema(t *testing.T) {
	tb := setup(t, pgstore.Config{})
	rows, err := tb.pool.Query(ctxT(t), `
		SELECT column_name, data_type, is_nullable
		FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = $1
		ORDER BY ordinal_position`, pgstore.DefaultTable)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var name, typ, null string
		if err := rows.Scan(&name, &typ, &null); err != nil {
			t.Fatal(err)
		}
		got = append(got, name+" "+typ+" "+null)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"namespace text NO",
		"scope text NO",
		"key_value text NO",
		"request_hash bytea NO",
		"request_payload jsonb NO",
		"status text NO",
		"result_payload json YES",
		"error_payload jsonb YES",
		"owner_token text NO",
		"fence bigint NO",
		"created_at timestamp with time zone NO",
		"expires_at timestamp with time zone NO",
		"lease_expires_at timestamp with time zone YES",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("columns (-want +got):\n%s", diff)
	}
	var index string
	err = tb.pool.QueryRow(ctxT(t), `SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() AND indexname = $1`,
		pgstore.DefaultTable+"_purge_idx").Scan(&index)
	if err != nil || !strings.Contains(index, `(namespace COLLATE "C", expires_at)`) {
		t.Errorf("purge index = %q, %v", index, err)
	}
}

// TestMigrationSQL: the printed SQL, run by another tool, gives a working
// store; invalid table names are refused.
func TestMigrationSQL(t *testing.T) {
	sql, err := pgstore.MigrationSQL("other_records")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`CREATE TABLE IF NOT EXISTS "other_records"`, `"other_records_purge_idx"`,
		`DROP INDEX IF EXISTS "other_records_expires_idx"`, `DROP INDEX IF EXISTS "other_records_expiry_idx"`} {
		if !strings.Contains(sql, want) {
			t.Errorf("MigrationSQL lacks %s:\n%s", want, sql)
		}
	}
	if strings.Contains(sql, "{{") {
		t.Errorf("MigrationSQL has an unexpanded placeholder:\n%s", sql)
	}
	if _, err := pgstore.MigrationSQL("x; DROP TABLE y"); err == nil {
		t.Error("MigrationSQL accepted an invalid table name")
	}
	def, err := pgstore.MigrationSQL("")
	if err != nil || !strings.Contains(def, `"`+pgstore.DefaultTable+`"`) {
		t.Errorf("MigrationSQL(\"\") = %v, want the default table", err)
	}

	url := pgtest.URL(t)
	pool := newPool(t, url)
	ctx := ctxT(t)
	if _, err := pool.Exec(ctx, sql); err != nil {
		t.Fatalf("running MigrationSQL: %v", err)
	}
	if _, err := pool.Exec(ctx, sql); err != nil {
		t.Fatalf("running MigrationSQL again: %v", err)
	}
	s, err := pgstore.New(pool, pgstore.Config{Table: "other_records"})
	if err != nil {
		t.Fatal(err)
	}
	lifecycle(t, s)
}

// TestQualifiedTable: a schema-qualified table is created, schema and
// all, by Migrate and used by every statement.
func TestQualifiedTable(t *testing.T) {
	url := pgtest.URL(t)
	pool := newPool(t, url)
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "pgstore_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
	})
	s, err := pgstore.New(pool, pgstore.Config{Table: schema + ".records"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	lifecycle(t, s)
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+schema+".records").Scan(&n); err != nil || n != 1 {
		t.Errorf("rows in %s.records = %d, %v; want 1", schema, n, err)
	}
}

// lifecycle runs Begin, Commit and a replay on s.
func lifecycle(t *testing.T, s idem.Store) {
	t.Helper()
	ctx := ctxT(t)
	k := mustKey(t, idemtest.RandomNamespace(t), "k")
	r := mustRequest(t, `{"a":1}`)
	o, err := s.Begin(ctx, k, r, nil)
	if err != nil || o.Kind != idem.Fresh {
		t.Fatalf("Begin = %v, %v", o.Kind, err)
	}
	if err := s.Commit(ctx, k, o.Lease, []byte(`{"ok":true}`)); err != nil {
		t.Fatal(err)
	}
	if p, err := s.Begin(ctx, k, r, nil); err != nil || p.Kind != idem.PriorResult || string(p.Result) != `{"ok":true}` {
		t.Fatalf("replay = %v %s, %v", p.Kind, p.Result, err)
	}
}

// TestMigrateWithoutDatabasePrivilege: a role that may create tables in an
// existing schema, but not schemas, can migrate a table qualified with
// that schema.
// roleAndSchema creates a login role and a schema with a random suffix,
// dropped when the test ends, and runs the statements grants makes of
// them.
func roleAndSchema(t *testing.T, ctx context.Context, admin *pgxpool.Pool, grants func(role, schema string) []string) (role, schema string) {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	suffix := hex.EncodeToString(b[:])
	role, schema = "pgstore_role_"+suffix, "pgstore_schema_"+suffix
	t.Cleanup(func() {
		ctx := context.Background()
		_, _ = admin.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
		_, _ = admin.Exec(ctx, "DROP OWNED BY "+role)
		_, _ = admin.Exec(ctx, "DROP ROLE IF EXISTS "+role)
	})
	for _, q := range append([]string{"CREATE ROLE " + role + " LOGIN", "CREATE SCHEMA " + schema}, grants(role, schema)...) {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return role, schema
}

// poolAs connects to url as role, or skips the test if the server lets
// no role in without a password.
func poolAs(t *testing.T, ctx context.Context, url, role string) *pgxpool.Pool {
	t.Helper()
	u, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	u.User = neturl.User(role)
	pool := newPool(t, u.String())
	var pe *pgconn.PgError
	if err := pool.Ping(ctx); errors.As(err, &pe) && strings.HasPrefix(pe.Code, "28") {
		t.Skipf("the server does not let a new role in without a password: %v", err)
	}
	return pool
}

func TestMigrateWithoutDatabasePrivilege(t *testing.T) {
	url := pgtest.URL(t)
	admin := newPool(t, url)
	ctx := ctxT(t)
	role, schema := roleAndSchema(t, ctx, admin, func(role, schema string) []string {
		return []string{"GRANT USAGE, CREATE ON SCHEMA " + schema + " TO " + role}
	})
	s, err := pgstore.New(poolAs(t, ctx, url, role), pgstore.Config{Table: schema + ".records"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("Migrate as a role without CREATE on the database: %v", err)
	}
	lifecycle(t, s)
}

// On a current schema Migrate only looks: it neither waits for a
// transaction holding a reservation nor needs more than the table's
// read/write privileges, so any process may call it at every start.
func TestMigrateOnACurrentSchemaOnlyLooks(t *testing.T) {
	url := pgtest.URL(t)
	admin := newPool(t, url)
	ctx := ctxT(t)
	role, schema := roleAndSchema(t, ctx, admin, func(string, string) []string { return nil })
	table := schema + ".records"
	owner, err := pgstore.New(admin, pgstore.Config{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	if err := owner.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"GRANT USAGE ON SCHEMA " + schema + " TO " + role, "GRANT SELECT, INSERT, UPDATE, DELETE ON " + table + " TO " + role} {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}

	// A transaction holds a reservation, and so a lock on the table.
	tx, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	k, _ := idem.ParseKey(idem.MustNamespace("migrate"), "held")
	if _, err := owner.WithTx(tx).Begin(ctx, k, mustRequest(t, `{}`), nil); err != nil {
		t.Fatal(err)
	}
	quick, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := owner.Migrate(quick); err != nil {
		t.Fatalf("Migrate of a current schema beside an open transaction: %v", err)
	}

	s, err := pgstore.New(poolAs(t, ctx, url, role), pgstore.Config{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(quick); err != nil {
		t.Fatalf("Migrate as a role that may only use the table: %v", err)
	}
}
