package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// durableMigrate is `idem durable migrate --db URL`: it creates the
// engine's tables, or brings them up to date, in the first schema of the
// connection's search_path (durable.Client.Migrate). Running it again
// changes nothing.
func durableMigrate(ctx context.Context, d *durableCall) error {
	if err := d.parse(); err != nil {
		return err
	}
	c, err := d.client(ctx)
	if err != nil {
		return err
	}
	if err := c.Migrate(ctx); err != nil {
		return err
	}
	return printJSON(d.stdout, map[string]any{"migrated": true})
}

// explainSchema explains err when PostgreSQL says that a table or column
// of the engine is not there: the database was never migrated, or was by
// an older idem, and idem durable migrate is the cure (its --db shown
// without the password, saying so: passwordNote). Other errors are
// returned as they are.
func (d *durableCall) explainSchema(err error) error {
	pe, ok := errors.AsType[*pgconn.PgError](err)
	if !ok {
		return err
	}
	switch pe.Code {
	case "42P01": // undefined_table
		return fmt.Errorf("the durable engine's tables are not in this database (%s); run idem durable migrate --db %s to create them%s", pe.Message, shellWord(redact(d.dsn)), passwordNote(d.dsn))
	case "42703": // undefined_column
		return fmt.Errorf("the durable engine's tables are out of date (%s); run idem durable migrate --db %s to update them%s", pe.Message, shellWord(redact(d.dsn)), passwordNote(d.dsn))
	}
	return err
}

// shellWord quotes s for a POSIX shell when it holds characters the shell
// would take apart, as a DSN's spaces, '&' and '?' are.
func shellWord(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"\\$&;|<>()`*?[]#~!{}") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
