package main_test

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemgo/idem/internal/pgtest"
)

// expiredPostgresRecords migrates the Postgres store at dsn and fills
// namespace http with n expired records, the last to expire keyed
// "poison", and puts on the table a trigger that runs onPoison (a
// PL/pgSQL statement) when that record is deleted. idem purge deletes
// 1000 records per statement, oldest first: with n over 1000, the first
// statement commits and the one deleting "poison" runs onPoison. It
// returns a connection to the store's database.
func expiredPostgresRecords(t *testing.T, dsn string, n int, onPoison string) *pgx.Conn {
	t.Helper()
	if r := runIdem(t, t.TempDir(), nil, "migrate", "--store", dsn); r.code != 0 {
		t.Fatalf("idem migrate: exit %d, stderr %q", r.code, r.stderr)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	_, err = conn.Exec(ctx, `
INSERT INTO idempotency_record (namespace, key_value, request_hash, request_payload, status, result_payload, owner_token, fence, created_at, expires_at)
SELECT 'http', CASE WHEN i = $1 THEN 'poison' ELSE 'k' || i END, '\x00', '{}', 'committed', '{}', 'o', 1,
       now() - interval '2 days', now() - interval '1 day' + i * interval '1 second'
FROM generate_series(1, $1) AS i`, n)
	if err != nil {
		t.Fatal(err)
	}
	_, err = conn.Exec(ctx, `
CREATE FUNCTION poison() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF OLD.key_value = 'poison' THEN `+onPoison+`; END IF;
  RETURN OLD;
END $$;
CREATE TRIGGER poison BEFORE DELETE ON idempotency_record FOR EACH ROW EXECUTE FUNCTION poison()`)
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

// TestPurgeFailureSaysWhatWasPurged: idem purge deletes in batches, each
// committed on its own; when a later batch fails, the records of the
// batches before it stay deleted, and the message says how many there
// were, as it says how many when all went well.
func TestPurgeFailureSaysWhatWasPurged(t *testing.T) {
	t.Parallel()
	dsn := pgtest.URL(t)
	expiredPostgresRecords(t, dsn, 1500, "RAISE EXCEPTION 'cannot delete poison'")
	r := runIdem(t, t.TempDir(), nil, "purge", "--store", dsn)
	if want := "purged 1000 expired records of namespace http before failing"; r.code != 1 || !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "cannot delete poison") {
		t.Errorf("idem purge failing after one batch: exit %d, stdout %q, stderr %q; want exit 1, %q and the cause", r.code, r.stdout, r.stderr, want)
	}
}

// TestPurgeInterrupted: SIGINT or SIGTERM during idem purge ends it
// saying it was interrupted and how many records it had purged by then
// (they stay purged), exit code 1.
func TestPurgeInterrupted(t *testing.T) {
	t.Parallel()
	dsn := pgtest.URL(t)
	conn := expiredPostgresRecords(t, dsn, 1500, "PERFORM pg_sleep(60)")
	cmd := exec.Command(idemBin, "purge", "--store", dsn)
	cmd.Dir = t.TempDir()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	// The first batch is committed once 500 records are left to see; the
	// second then sleeps in the trigger.
	deadline := time.Now().Add(20 * time.Second)
	for {
		var left int
		if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM idempotency_record").Scan(&left); err != nil {
			t.Fatal(err)
		}
		if left == 500 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the first batch was never purged: %d records left", left)
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	want := "interrupted after purging 1000 expired records of namespace http (they stay purged)"
	if ee, ok := errors.AsType[*exec.ExitError](err); !ok || ee.ExitCode() != 1 || !strings.Contains(stderr.String(), want) {
		t.Errorf("idem purge after SIGTERM: %v, stdout %q, stderr %q; want exit 1 and %q", err, stdout.String(), stderr.String(), want)
	}
}

// TestUsageErrorsNameTheVariable: a value that idem proxy, migrate, purge
// or inspect refuses once its flags are parsed (a DSN, a namespace, a key,
// an upstream)
// and that came from an IDEM_* variable, the command line not setting the
// flag, is named with that variable: the command as typed shows no such
// value. Given on the command line, the variable is not named.
func TestUsageErrorsNameTheVariable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env  string
		args []string
	}{
		{"IDEM_STORE=nosuch", []string{"migrate"}},
		{"IDEM_STORE=nosuch", []string{"purge"}},
		{"IDEM_STORE=sqlite:", []string{"inspect", "--key", "k"}},
		{"IDEM_NAMESPACE=Bad", []string{"purge"}},
		{"IDEM_NAMESPACE=Bad", []string{"inspect", "--key", "k"}},
		{"IDEM_INSPECT_KEY=a,b", []string{"inspect"}},
		{"IDEM_SCOPE=" + strings.Repeat("s", 300), []string{"inspect", "--key", "k"}},
		{"IDEM_STORE=nosuch", []string{"proxy", "--upstream", "http://127.0.0.1:1", "--listen", "127.0.0.1:0"}},
		{"IDEM_NAMESPACE=Bad", []string{"proxy", "--upstream", "http://127.0.0.1:1", "--store", "memory", "--listen", "127.0.0.1:0"}},
		{"IDEM_UPSTREAM=http://127.0.0.1:1/?q=1", []string{"proxy", "--store", "memory", "--listen", "127.0.0.1:0"}},
	} {
		name, _, _ := strings.Cut(tc.env, "=")
		r := runIdem(t, t.TempDir(), []string{tc.env}, tc.args...)
		if r.code != 2 || !strings.Contains(r.stderr, name) {
			t.Errorf("%s idem %q: exit %d, stderr %q; want 2 and a message naming %s", tc.env, tc.args, r.code, r.stderr, name)
		}
	}
	r := runIdem(t, t.TempDir(), []string{"IDEM_NAMESPACE=ok"}, "purge", "--namespace", "Bad")
	if r.code != 2 || strings.Contains(r.stderr, "IDEM_NAMESPACE") {
		t.Errorf("idem purge --namespace Bad with IDEM_NAMESPACE=ok: exit %d, stderr %q; want 2, without the variable", r.code, r.stderr)
	}
}
