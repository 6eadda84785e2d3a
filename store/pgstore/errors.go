package pgstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/idemgo/idem"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// errNoPool is returned by the methods of a Store made without a pool,
// which can only be used through WithTx and WithSQLTx, and of the zero
// Store: a programming error, which retrying cannot mend.
var errNoPool = fmt.Errorf("pgstore: the Store has no pool (New was given nil, for WithTx and WithSQLTx only; or the Store was not made by New): %w", idem.ErrInvalidArgument)

// classify turns the error of a database call made for op into the error
// the store returns:
//
//   - the caller's transaction has ended (transactional mode; pgx's
//     ErrTxClosed, database/sql's ErrTxDone): an error satisfying
//     errors.Is(err, idem.ErrInvalidArgument), since the store must not be
//     used after its transaction ends, and retrying cannot help;
//   - ctx is done: an error satisfying errors.Is(err, ctx.Err());
//   - the server rejected a value (SQLSTATE class 22, data exception, such
//     as JSON that JSONB cannot hold; or 54001, nesting too deep): an error
//     satisfying errors.Is(err, idem.ErrInvalidPayload);
//   - an integrity constraint was violated (SQLSTATE class 23): the table
//     has constraints the store does not know of, or rows it did not
//     write; retrying cannot help, so the error is neither of the above
//     nor ErrUnavailable, just the database's error, wrapped;
//   - anything else (connection refused or lost, server shutting down,
//     missing table, serialization failure): an error
//     satisfying errors.Is(err, idem.ErrUnavailable). A missing table or
//     column says to run Store.Migrate: the schema may yet arrive (a
//     deployment whose migration runs after the service started), but
//     usually Migrate was forgotten.
//
// Each keeps err in its chain, so errors.As finds a *pgconn.PgError.
func classify(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrTxClosed) || errors.Is(err, sql.ErrTxDone) {
		return fmt.Errorf("pgstore: %s: the transaction has ended (committed or rolled back): %w: %w", op, idem.ErrInvalidArgument, err)
	}
	if ce := ctx.Err(); ce != nil {
		return ctxError(op, ce, err)
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case strings.HasPrefix(pe.Code, "22") || pe.Code == "54001":
			return fmt.Errorf("pgstore: %s: %w: %w", op, idem.ErrInvalidPayload, err)
		case strings.HasPrefix(pe.Code, "23"):
			return fmt.Errorf("pgstore: %s: %w", op, err)
		case pe.Code == "42P01" || pe.Code == "42703": // undefined table or column
			return idem.Unavailable(fmt.Errorf("pgstore: %s: the store's table is missing or out of date (run Store.Migrate, or idem migrate): %w", op, err))
		}
	}
	return idem.Unavailable(fmt.Errorf("pgstore: %s: %w", op, err))
}

// ctxError reports that ctx ended (ce is its Err) during op, with the
// database's own error when there was one.
func ctxError(op string, ce, err error) error {
	if err == nil || errors.Is(err, ce) {
		return fmt.Errorf("pgstore: %s: %w", op, ce)
	}
	return fmt.Errorf("pgstore: %s: %w (%v)", op, ce, err)
}

// staleError reports a settle call whose lease is not current.
func staleError(op string) error {
	return fmt.Errorf("pgstore: %s: %w", op, idem.ErrStaleToken)
}

// corruptError reports a stored value the store cannot read back. A
// record only gets there by being written outside the store; the store
// counts it as a backend failure.
func corruptError(op, what string, err error) error {
	return idem.Unavailable(fmt.Errorf("pgstore: %s: stored %s is unreadable: %w", op, what, err))
}

// retryable reports whether err, from a statement b ran for ctx, lets the
// statement run again: in lease mode (autocommitted), while ctx lasts, a
// serialization failure (SQLSTATE 40001), where another writer changed
// the record after the statement's snapshot, the session's
// default_transaction_isolation being repeatable read or serializable.
// The statement's transaction was rolled back, so it may run again, on a
// new snapshot, as read committed would have had it.
func (b binding) retryable(ctx context.Context, err error) bool {
	var pe *pgconn.PgError
	return err != nil && !b.tx && ctx.Err() == nil && errors.As(err, &pe) && pe.Code == "40001"
}
