package durable

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// migrationFiles are the schema migrations, NNN_name.sql, applied in order
// of NNN.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrateLockID is the transaction-level advisory lock Migrate holds, so
// that processes migrating at once run one after the other. It is the first
// 8 bytes of SHA-256("idem/durable/migrate") as a signed 64-bit integer.
const migrateLockID int64 = -2242149055609616667 // 0xe0e2495036e946e5

// migration is one embedded migration file.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the embedded migrations in version order.
func migrations() []migration {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		panic("durable: embedded migrations: " + err.Error()) // cannot happen: embedded at build time
	}
	var out []migration
	for _, e := range entries {
		prefix, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(prefix)
		if !ok || err != nil {
			panic("durable: migration without a version prefix: " + e.Name())
		}
		b, err := migrationFiles.ReadFile("migrations/" + e.Name())
		if err != nil {
			panic("durable: embedded migrations: " + err.Error())
		}
		out = append(out, migration{version: v, name: e.Name(), sql: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out
}

// MigrationSQL returns the SQL of every migration, in order, for teams that
// run their own migration tool. Unlike Migrate, it does not record which
// migrations ran; run it once on an empty schema.
func MigrationSQL() string {
	var b strings.Builder
	for _, m := range migrations() {
		fmt.Fprintf(&b, "-- %s\n%s\n", m.name, m.sql)
	}
	return b.String()
}

// Migrate creates or updates the engine's tables in the first schema of the
// pool's search_path: durable_instance, durable_signal,
// durable_signal_dedup, durable_rate_limit_bucket, and durable_migration,
// which records the migrations applied. It is idempotent, and safe to run from several processes at
// once: it runs in one transaction that first takes an advisory lock, so
// concurrent callers run one after the other and the later ones find
// nothing to do. The transaction is READ COMMITTED whatever the database's
// default isolation, so that a caller that waited for the lock sees the
// migrations recorded meanwhile.
func (c *Client) Migrate(ctx context.Context) error {
	return pgx.BeginTxFunc(ctx, c.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", migrateLockID); err != nil {
			return fmt.Errorf("durable: Migrate: %w", err)
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS durable_migration (
    version    integer     PRIMARY KEY,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)`); err != nil {
			return fmt.Errorf("durable: Migrate: %w", err)
		}
		applied := map[int]bool{}
		rows, err := tx.Query(ctx, "SELECT version FROM durable_migration")
		if err != nil {
			return fmt.Errorf("durable: Migrate: %w", err)
		}
		versions, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		if err != nil {
			return fmt.Errorf("durable: Migrate: %w", err)
		}
		for _, v := range versions {
			applied[int(v)] = true
		}
		for _, m := range migrations() {
			if applied[m.version] {
				continue
			}
			// No arguments: pgx sends the text with the simple protocol,
			// which allows several statements.
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return fmt.Errorf("durable: Migrate: %s: %w", m.name, err)
			}
			if _, err := tx.Exec(ctx, "INSERT INTO durable_migration (version, name) VALUES ($1, $2)", m.version, m.name); err != nil {
				return fmt.Errorf("durable: Migrate: %w", err)
			}
		}
		return nil
	})
}
