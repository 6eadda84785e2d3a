package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/idemgo/idem"
)

// errChanged is the cause of the ErrUnavailable that Begin returns if the
// record changed between its statements, which the write lock it holds
// rules out: the database is not behaving as SQLite does.
var errChanged = errors.New("sqlitestore: record changed while Begin held the write lock")

// dbError maps a failure reported by database/sql or the driver to the
// errors of the idem.Store contract:
//
//   - the caller's transaction has ended (transactional mode,
//     sql.ErrTxDone): an error satisfying errors.Is(err,
//     idem.ErrInvalidArgument), since the store must not be used after its
//     transaction ends, and retrying cannot help.
//   - ctx is done: an error satisfying errors.Is(err, ctx.Err()). The driver
//     interrupted the statement, and SQLite rolled it back.
//   - anything else (a closed *sql.DB, an I/O error, a full disk,
//     SQLITE_BUSY after busy_timeout ran out, a missing table):
//     idem.Unavailable, so that errors.Is(err, idem.ErrUnavailable) holds
//     and errors.As still reaches the driver's error. A missing table or
//     column says to run Store.Migrate.
//
// It returns nil for nil.
func dbError(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, sql.ErrTxDone) {
		return fmt.Errorf("sqlitestore: the transaction has ended (committed or rolled back): %w: %w", idem.ErrInvalidArgument, err)
	}
	if cerr := ctx.Err(); cerr != nil {
		if errors.Is(err, cerr) {
			return fmt.Errorf("sqlitestore: %w", err)
		}
		return fmt.Errorf("sqlitestore: %w (%v)", cerr, err)
	}
	if strings.Contains(err.Error(), "no such table") || strings.Contains(err.Error(), "no such column") {
		return idem.Unavailable(fmt.Errorf("sqlitestore: the store's table is missing or out of date (run Store.Migrate, or idem migrate): %w", err))
	}
	return idem.Unavailable(fmt.Errorf("sqlitestore: %w", err))
}
