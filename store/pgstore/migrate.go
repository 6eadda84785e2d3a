package pgstore

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/idemgo/idem"
)

// migrationFiles are the schema migrations, applied in file name order.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrateLockID is the advisory lock Migrate holds while it runs, so that
// processes starting together do not race on CREATE TABLE IF NOT EXISTS
// (which is not safe against itself). It is the same for every table:
// migrations are rare and short. The value is the first 8 bytes of
// SHA-256("idem/pgstore/migrate"), as a signed 64-bit integer.
const migrateLockID int64 = -4464102279799023034 // 0xc20c52a0db915a46

// migrations returns the SQL of every migration for t, in order.
func migrations(t table) []string {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		panic("pgstore: embedded migrations: " + err.Error()) // cannot happen: embedded at build time
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	version1, version2 := t.oldIndexIdents()
	r := strings.NewReplacer("{{table}}", t.ident(), "{{index}}", t.indexIdent(),
		"{{version1_index}}", version1, "{{version2_index}}", version2)
	var out []string
	if s := t.schemaIdent(); s != "" {
		// Not CREATE SCHEMA IF NOT EXISTS: that needs the CREATE privilege
		// on the database even when the schema exists. The name is a
		// validated lowercase identifier, so it is safe as a literal.
		out = append(out, "DO $$\nBEGIN\n    IF to_regnamespace('"+t.schema+"') IS NULL THEN\n        CREATE SCHEMA "+s+";\n    END IF;\nEND\n$$;\n")
	}
	for _, name := range names {
		b, err := migrationFiles.ReadFile("migrations/" + name)
		if err != nil {
			panic("pgstore: embedded migrations: " + err.Error())
		}
		out = append(out, r.Replace(string(b)))
	}
	return out
}

// MigrationSQL returns the SQL that creates the schema objects of a Store
// whose Config.Table is table ("" for DefaultTable), for teams that run
// their own migration tool. Every statement is idempotent. It is the SQL
// Migrate runs; it does not take Migrate's advisory lock, so run it from
// one process (as migration tools do). The error reports an invalid table
// name.
func MigrationSQL(tableName string) (string, error) {
	if tableName == "" {
		tableName = DefaultTable
	}
	t, err := parseTable(tableName)
	if err != nil {
		return "", fmt.Errorf("pgstore: table: %w", err)
	}
	return strings.Join(migrations(t), "\n"), nil
}

// Migrate creates or updates the store's table, index and, when the table
// name is schema-qualified, schema. It is idempotent, and safe to call from
// several processes at once: it runs in one transaction that first takes a
// transaction-level advisory lock (pg_advisory_xact_lock), so concurrent
// callers run one after the other and the later ones find nothing to do.
// Errors are wrapped as for the other methods (errors.Is(err,
// idem.ErrUnavailable) when the server cannot be used).
//
// On a schema that is already current Migrate only looks: it takes no lock
// and needs no privilege beyond reading the catalog, so a role that may
// only read and write the table can call it at every start, and it never
// waits for, or holds up, the transactions using the table. Creating or
// upgrading the schema needs the CREATE privilege on the schema and the
// ownership of the table, and building an index blocks writers while it
// runs.
func (s *Store) Migrate(ctx context.Context) error {
	if s.pool == nil {
		return errNoPool
	}
	if err := ctx.Err(); err != nil {
		return ctxError("Migrate", err, nil)
	}
	var current bool
	version1, version2 := s.table.oldIndexIdents()
	if err := s.pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL AND to_regclass($2) IS NOT NULL
		AND to_regclass($3) IS NULL AND to_regclass($4) IS NULL`,
		s.table.ident(), s.table.qualifiedIndexIdent(), version1, version2).Scan(&current); err != nil {
		return classify(ctx, "Migrate", err)
	}
	if current {
		return nil
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return classify(ctx, "Migrate", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", migrateLockID); err != nil {
		return classify(ctx, "Migrate", err)
	}
	for _, m := range migrations(s.table) {
		// No arguments: pgx sends the text with the simple protocol, which
		// allows several statements.
		if _, err := tx.Exec(ctx, m); err != nil {
			return classify(ctx, "Migrate", err)
		}
	}
	if err := s.checkShape(ctx, tx); err != nil {
		return err
	}
	return classify(ctx, "Migrate", tx.Commit(ctx))
}

// checkShape reports whether the store's table, which CREATE TABLE IF NOT
// EXISTS may have found made by something else, fits the store's
// statements: it prepares, without running them, Begin's statement (every
// column it writes and reads, and the unique key its ON CONFLICT names)
// and Get's. The server checks a statement against the schema when it
// prepares it.
func (s *Store) checkShape(ctx context.Context, tx pgx.Tx) error {
	for _, query := range []string{s.sql.begin, s.sql.get} {
		if _, err := tx.Prepare(ctx, "", query); err != nil {
			if ctx.Err() != nil {
				return classify(ctx, "Migrate", err)
			}
			return idem.Unavailable(fmt.Errorf("pgstore: Migrate: table %s exists, but not with the store's columns and unique key (made by something else? see MigrationSQL; or set Config.Table): %w", s.table.ident(), err))
		}
	}
	return nil
}
