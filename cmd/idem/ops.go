package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
)

func parseNamespace(s string) (idem.Namespace, error) {
	ns, err := idem.NewNamespace(s)
	if err != nil {
		return "", usagef("--namespace: %w", err)
	}
	return ns, nil
}

// noTable explains err, from a store call, when it says that the store's
// table is not there (Postgres's undefined_table): idem migrate creates
// it. Other errors are returned as they are.
func noTable(st *openedStore, err error) error {
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok && pe.Code == "42P01" { // undefined_table
		return notMigrated{fmt.Errorf("%s store %s: %s; run idem migrate --store %s to create the table", st.kind, st.name, pe.Message, shellWord(st.name))}
	}
	return err
}

// checkTable checks that the store's table is there, for a store that
// was not migrated: the record of a key no client sends is looked up and
// must be found missing, not fail. A missing table is explained as
// noTable explains it; a store without tables (memory, Redis) passes.
func checkTable(ctx context.Context, st *openedStore, ns idem.Namespace) error {
	k, err := idem.ParseKey(ns, "idem-table-check")
	if err != nil {
		return err
	}
	if _, err := st.Get(ctx, k); err != nil && !errors.Is(err, idem.ErrNotFound) {
		return noTable(st, err)
	}
	return nil
}

// openStoreWritten is openStore for the commands that work on records a
// proxy wrote (inspect, purge): the memory store, which lives and ends
// inside one proxy process, is refused, since a new one holds nothing.
func openStoreWritten(ctx context.Context, dsn string, o storeOpts) (*openedStore, error) {
	if dsn == "memory" {
		return nil, usagef("--store memory: the memory store lives and ends inside the idem proxy that uses it, so this command would see a new, empty one; give the --store of a SQLite, Postgres or Redis store")
	}
	return openStore(ctx, dsn, o)
}

func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer, getenv env) error {
	fs := flag.NewFlagSet("idem migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dsn := fs.String("store", DefaultDSN, "store DSN")
	if err := parseWithHelp(fs, args, getenv, stdout); err != nil {
		return err
	}
	st, err := openStore(ctx, *dsn, storeOpts{})
	if err != nil {
		return err
	}
	defer st.close()
	if st.migrate == nil {
		fmt.Fprintf(stdout, "%s store: no schema to migrate\n", st.kind)
		return nil
	}
	if err := st.migrate(ctx); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s store: schema up to date\n", st.kind)
	return nil
}

func runPurge(ctx context.Context, args []string, stdout, stderr io.Writer, getenv env) error {
	fs := flag.NewFlagSet("idem purge", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dsn := fs.String("store", DefaultDSN, "store DSN")
	nsFlag := fs.String("namespace", "http", "namespace to purge")
	if err := parseWithHelp(fs, args, getenv, stdout); err != nil {
		return err
	}
	ns, err := parseNamespace(*nsFlag)
	if err != nil {
		return err
	}
	st, err := openStoreWritten(ctx, *dsn, storeOpts{existing: true})
	if err != nil {
		return err
	}
	defer st.close()
	n, err := st.PurgeExpired(ctx, ns, time.Now())
	if err != nil {
		return noTable(st, err)
	}
	fmt.Fprintf(stdout, "purged %d expired records of namespace %s\n", n, ns)
	return nil
}

// inspected is the JSON idem inspect prints.
type inspected struct {
	Namespace      string            `json:"namespace"`
	Scope          string            `json:"scope,omitempty"`
	Key            string            `json:"key"`
	Status         idem.Status       `json:"status"`
	Fingerprint    string            `json:"fingerprint"`
	Fence          int64             `json:"fence"`
	CreatedAt      time.Time         `json:"created_at"`
	ExpiresAt      time.Time         `json:"expires_at"`
	LeaseExpiresAt *time.Time        `json:"lease_expires_at,omitempty"`
	Request        json.RawMessage   `json:"request"`
	Result         json.RawMessage   `json:"result,omitempty"`
	Error          *idem.StoredError `json:"error,omitempty"`
}

func runInspect(ctx context.Context, args []string, stdout, stderr io.Writer, getenv env) error {
	fs := flag.NewFlagSet("idem inspect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dsn := fs.String("store", DefaultDSN, "store DSN")
	nsFlag := fs.String("namespace", "http", "namespace of the record")
	keyFlag := fs.String("key", "", "the Idempotency-Key value (required)")
	scope := fs.String("scope", "", "the key's scope as stored")
	auth := fs.String("authorization", "", "compute the scope from this Authorization header value, as the proxy does")
	if err := parseWithHelp(fs, args, getenv, stdout); err != nil {
		return err
	}
	ns, err := parseNamespace(*nsFlag)
	if err != nil {
		return err
	}
	if *keyFlag == "" {
		return missingFlag("--key is required")
	}
	k, err := idem.ParseKey(ns, *keyFlag)
	if err != nil {
		return usagef("--key: %w", err)
	}
	if *auth != "" {
		if *scope != "" {
			return usagef("give --scope or --authorization, not both")
		}
		r, _ := http.NewRequest(http.MethodPost, "/", nil)
		r.Header.Set("Authorization", *auth)
		*scope = idemhttp.ScopeByAuthorization(r)
	}
	if k, err = k.WithScope(*scope); err != nil {
		return usagef("--scope: %w", err)
	}
	st, err := openStoreWritten(ctx, *dsn, storeOpts{existing: true, readOnly: true})
	if err != nil {
		return err
	}
	defer st.close()
	rec, err := st.Get(ctx, k)
	if errors.Is(err, idem.ErrNotFound) {
		return fmt.Errorf("no live record for key %q in namespace %s (scope %q)", k.Value(), ns, k.Scope())
	}
	if err != nil {
		return noTable(st, err)
	}
	out := inspected{
		Namespace: string(ns), Scope: k.Scope(), Key: k.Value(), Status: rec.Status, Fingerprint: rec.Fingerprint.String(),
		Fence: rec.Fence, CreatedAt: rec.CreatedAt, ExpiresAt: rec.ExpiresAt, Request: rec.Request, Result: rec.Result, Error: rec.Error,
	}
	if !rec.LeaseExpiresAt.IsZero() {
		out.LeaseExpiresAt = &rec.LeaseExpiresAt
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
