package sqlitestore

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strings"
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
// several processes at once. Errors from the database satisfy
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
	return dbError(ctx, tx.Commit())
}
