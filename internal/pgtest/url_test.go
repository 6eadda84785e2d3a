package pgtest_test

import (
	"context"
	"database/sql"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem/internal/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
)

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// schemaOf returns the schema a URL from pgtest.URL puts its connections in.
func schemaOf(t *testing.T, conn string) string {
	t.Helper()
	u, err := url.Parse(conn)
	if err != nil {
		t.Fatal(err)
	}
	schema := u.Query().Get("search_path")
	if !strings.HasPrefix(schema, "pgtest_") {
		t.Fatalf("URL %q has search_path %q, want a pgtest_ schema", conn, schema)
	}
	return schema
}

func TestURLWithPgxpool(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	url := pgtest.URL(t)
	want := schemaOf(t, url)
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)

	// Every connection of the pool, not just the first, is in the schema.
	conns := make([]*pgxpool.Conn, 3)
	for i := range conns {
		if conns[i], err = pool.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range conns {
		var schema string
		if err := c.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
			t.Fatal(err)
		}
		if schema != want {
			t.Errorf("connection %d: current_schema() = %q, want %q", i, schema, want)
		}
		c.Release()
	}

	if _, err := pool.Exec(ctx, "CREATE TABLE t (k text PRIMARY KEY); INSERT INTO t VALUES ('a')"); err != nil {
		t.Fatal(err)
	}
	var n int
	err = pool.QueryRow(ctx, "SELECT count(*) FROM information_schema.tables WHERE table_schema = $1 AND table_name = 't'", want).Scan(&n)
	if err != nil || n != 1 {
		t.Fatalf("tables t in schema %s: %d, %v; want 1", want, n, err)
	}
}

func TestURLWithDatabaseSQL(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	url := pgtest.URL(t)
	want := schemaOf(t, url)
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	db.SetMaxIdleConns(0) // each statement on a fresh connection

	var schema string
	if err := db.QueryRowContext(ctx, "SELECT current_schema()").Scan(&schema); err != nil || schema != want {
		t.Fatalf("current_schema() = %q, %v; want %q", schema, err, want)
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE t (k text PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO t VALUES ($1)", "a"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil || n != 1 {
		t.Fatalf("count = %d, %v; want 1", n, err)
	}
}

func TestURLsAreIsolated(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	a, err := pgx.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close(context.Background()) })
	b, err := pgx.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close(context.Background()) })

	if _, err := a.Exec(ctx, "CREATE TABLE t (k int)"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Exec(ctx, "CREATE TABLE t (k text)"); err != nil {
		t.Fatalf("same table name in another URL's schema: %v", err)
	}
	if _, err := a.Exec(ctx, "INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := b.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil || n != 0 {
		t.Fatalf("other schema's table: count = %d, %v; want 0", n, err)
	}
}

func TestSchemaDroppedWhenTestEnds(t *testing.T) {
	t.Parallel()
	var schema string
	t.Run("inner", func(t *testing.T) {
		conn, err := pgx.Connect(testContext(t), pgtest.URL(t))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		if err := conn.QueryRow(testContext(t), "SELECT current_schema()").Scan(&schema); err != nil {
			t.Fatal(err)
		}
	})
	ctx := testContext(t)
	conn, err := pgx.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_namespace WHERE nspname = $1)", schema).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if schema == "" || exists {
		t.Fatalf("schema %q still exists after its test ended", schema)
	}
}
