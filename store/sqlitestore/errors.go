package sqlitestore

import (
	"context"
	"errors"
	"fmt"

	"github.com/idemgo/idem"
)

// errContended is the cause of the ErrUnavailable that Begin returns when
// the record kept changing under it for maxBeginAttempts rounds.
var errContended = errors.New("sqlitestore: record changed concurrently on every attempt")

// dbError maps a failure reported by database/sql or the driver to the
// errors of the idem.Store contract:
//
//   - ctx is done: an error satisfying errors.Is(err, ctx.Err()). The driver
//     interrupted the statement, and SQLite rolled it back.
//   - anything else (a closed *sql.DB, an I/O error, a full disk,
//     SQLITE_BUSY after busy_timeout ran out): idem.Unavailable, so that
//     errors.Is(err, idem.ErrUnavailable) holds and errors.As still reaches
//     the driver's error.
//
// It returns nil for nil.
func dbError(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil {
		if errors.Is(err, cerr) {
			return fmt.Errorf("sqlitestore: %w", err)
		}
		return fmt.Errorf("sqlitestore: %w (%v)", cerr, err)
	}
	return idem.Unavailable(fmt.Errorf("sqlitestore: %w", err))
}
