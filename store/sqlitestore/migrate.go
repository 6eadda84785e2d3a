package sqlitestore

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"github.com/idemgo/idem"
)

// migrations holds the schema, one file per version, applied in name order.
// Every statement in them is idempotent (IF NOT EXISTS), so Migrate needs no
// bookkeeping table of its own. The table name is written "{{table}}".
//
//go:embed migrations/*.sql
var migrations embed.FS

// MigrationSQL returns the SQL that Migrate runs for table ("" means
// DefaultTable), for operators who manage the schema themselves. It fails
// if table is not a valid Config.Table.
func MigrationSQL(table string) (string, error) {
	if table == "" {
		table = DefaultTable
	}
	if err := checkIdentifier(table); err != nil {
		return "", fmt.Errorf("sqlitestore: MigrationSQL: %w", err)
	}
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return "", err
	}
	sort.Strings(names)
	var b strings.Builder
	for _, name := range names {
		text, err := migrations.ReadFile(name)
		if err != nil {
			return "", err
		}
		b.WriteString(strings.ReplaceAll(string(text), "{{table}}", table))
	}
	return b.String(), nil
}

// Migrate creates the store's table and index if they do not exist yet, in
// one transaction. It is idempotent and safe to run at every start, from
// several processes at once. A table of that name that exists already
// must have the store's columns and primary key: one made by something
// else fails Migrate, which then changes nothing, rather than every later
// call. So does a database the store cannot write (a read-only file or
// mount, a connection opened read-only): Migrate takes the write lock
// even when there is nothing to create. Errors from the database satisfy
// errors.Is(err, idem.ErrUnavailable); a done ctx gives ctx's error.
func (s *Store) Migrate(ctx context.Context) error {
	text, err := MigrationSQL(s.cfg.Table)
	if err != nil {
		return err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return dbError(ctx, err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, text); err != nil {
		return dbError(ctx, err)
	}
	if err := s.checkShape(ctx, tx); err != nil {
		return err
	}
	// A write statement that changes nothing: it fails on a database
	// SQLite opened read-only, as every Begin would.
	if _, err := tx.ExecContext(ctx, s.sql.lock); err != nil {
		return dbError(ctx, err)
	}
	return dbError(ctx, tx.Commit())
}

// checkShape reports whether the store's table, which CREATE TABLE IF NOT
// EXISTS may have found made by something else, fits the store's
// statements: it prepares, without running them, Begin's insert (every
// column it writes, and the primary key its ON CONFLICT names) and read
// (every column a record is read from). SQLite checks a statement against
// the schema when it prepares it.
func (s *Store) checkShape(ctx context.Context, tx *sql.Tx) error {
	for _, query := range []string{s.sql.insert, s.sql.read} {
		stmt, err := tx.PrepareContext(ctx, query)
		if err != nil {
			if ctx.Err() != nil {
				return dbError(ctx, err)
			}
			return idem.Unavailable(fmt.Errorf("sqlitestore: Migrate: table %q exists, but not with the store's columns and primary key (made by something else? see MigrationSQL; or set Config.Table): %w", s.cfg.Table, err))
		}
		_ = stmt.Close()
	}
	return nil
}
