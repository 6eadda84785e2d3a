package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// URL returns a connection URL for tb alone: a new, empty schema with a
// random name on the shared server, made the only schema on search_path of
// every connection opened with the URL. The schema and all in it are
// dropped when tb ends. Objects outside schemas, such as advisory locks,
// NOTIFY channels and roles, are shared with the other tests.
//
// When no server can be had, tb is skipped, or fails under CI=true or
// TEST_REQUIRE_SERVERS=1.
func URL(tb testing.TB) string {
	tb.Helper()
	base, err := sharedURL()
	if err != nil {
		giveUp(tb, err)
		return ""
	}
	schema := "pgtest_" + randomHex(8)
	if err := execute(base, "CREATE SCHEMA "+schema); err != nil {
		tb.Fatalf("pgtest: creating schema %s: %v", schema, err)
	}
	tb.Cleanup(func() {
		// A transaction the test left open would hold the drop up forever.
		err := execute(base, "SET lock_timeout = '10s'; DROP SCHEMA "+schema+" CASCADE")
		if err != nil {
			tb.Errorf("pgtest: dropping schema %s (a connection left in a transaction?): %v", schema, err)
		}
	})
	u, err := withSearchPath(base, schema)
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	return u
}

// execute runs sql, which may hold several statements, on one new
// connection to url.
func execute(url, sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// withSearchPath adds the run-time parameter search_path=schema to a
// connection string, in URL or in keyword/value form.
func withSearchPath(conn, schema string) (string, error) {
	if !strings.HasPrefix(conn, "postgres://") && !strings.HasPrefix(conn, "postgresql://") {
		return conn + " search_path=" + schema, nil
	}
	u, err := url.Parse(conn)
	if err != nil {
		return "", err
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// randomHex returns 2n random hexadecimal digits.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails
	return hex.EncodeToString(b)
}
