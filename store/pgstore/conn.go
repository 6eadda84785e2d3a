package pgstore

import (
	"context"
	"database/sql"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// querier is what the store needs from a connection: a pool (lease mode),
// a pgx.Tx or a *sql.Tx (transactional mode).
type querier interface {
	// queryRow runs a query that returns at most one row and scans it into
	// dest; errNoRows when there is none.
	queryRow(ctx context.Context, query string, args []any, dest ...any) error
	// exec runs a statement and returns the number of rows it affected.
	exec(ctx context.Context, query string, args ...any) (int64, error)
}

// errNoRows is the querier's "no row" for both drivers.
var errNoRows = errors.New("pgstore: no rows")

// pgxDB is satisfied by *pgxpool.Pool, *pgxpool.Conn, *pgx.Conn and pgx.Tx.
type pgxDB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

type pgxQuerier struct{ db pgxDB }

func (q pgxQuerier) queryRow(ctx context.Context, query string, args []any, dest ...any) error {
	err := q.db.QueryRow(ctx, query, args...).Scan(dest...)
	if errors.Is(err, pgx.ErrNoRows) {
		return errNoRows
	}
	return err
}

func (q pgxQuerier) exec(ctx context.Context, query string, args ...any) (int64, error) {
	tag, err := q.db.Exec(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

// sqlQuerier runs on a database/sql transaction of the pgx driver
// (github.com/jackc/pgx/v5/stdlib), which passes the arguments to pgx as
// they are, so the same SQL and argument types work as with pgx.
type sqlQuerier struct{ tx *sql.Tx }

func (q sqlQuerier) queryRow(ctx context.Context, query string, args []any, dest ...any) error {
	err := q.tx.QueryRowContext(ctx, query, args...).Scan(dest...)
	if errors.Is(err, sql.ErrNoRows) {
		return errNoRows
	}
	return err
}

func (q sqlQuerier) exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := q.tx.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
