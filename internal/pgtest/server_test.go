package pgtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/idemgo/idem/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// query runs sql on a new connection, so that each call sees the server as
// it is now.
func query(url, sql string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var n int
	err = conn.QueryRow(ctx, sql).Scan(&n)
	return n, err
}

// execute runs sql, which may hold several statements, on a new connection.
func execute(url, sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

func TestPrivateServerStopAndStart(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	if err := execute(srv.URL(), "CREATE TABLE t (k int); INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}

	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := query(srv.URL(), "SELECT count(*) FROM t"); err == nil {
		t.Fatal("query on a stopped server succeeded")
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	if n, err := query(srv.URL(), "SELECT count(*) FROM t"); err != nil || n != 1 {
		t.Fatalf("after restart: count = %d, %v; want 1", n, err)
	}
}

func TestPrivateServerKillKeepsCommits(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	// An open session, so there is a backend for Kill to end too.
	ctx := context.Background()
	held, err := pgx.Connect(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close(ctx)
	if err := execute(srv.URL(), "CREATE TABLE t (k int); INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}

	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := held.Ping(ctx); err == nil {
		t.Fatal("a session survived Kill")
	}
	if _, err := query(srv.URL(), "SELECT 1"); err == nil {
		t.Fatal("query on a killed server succeeded")
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	if n, err := query(srv.URL(), "SELECT count(*) FROM t"); err != nil || n != 1 {
		t.Fatalf("after crash recovery: count = %d, %v; want 1", n, err)
	}
}
