package sqlitestore

import (
	"context"
	"database/sql"
)

// batchConn is the querier of a batch's transaction (see batcher): its
// connection, on which each statement is prepared once for the whole batch
// rather than once per call. SQLite parses and plans a statement each time
// one is run from its text, which costs more than running most of these:
// a batch of sixteen calls runs some sixty statements of half a dozen
// kinds. The transaction already holds the write lock (BEGIN IMMEDIATE),
// which Begin then need not take (see holdsWriteLock).
type batchConn struct {
	conn  *sql.Conn
	stmts map[string]*sql.Stmt
}

// stmt returns query prepared on c's connection, or nil when it could not
// be prepared: it then runs from its text, and fails there with the
// error its caller reports.
func (c *batchConn) stmt(ctx context.Context, query string) *sql.Stmt {
	if st, ok := c.stmts[query]; ok {
		return st
	}
	st, err := c.conn.PrepareContext(ctx, query)
	if err != nil {
		return nil
	}
	if c.stmts == nil {
		c.stmts = make(map[string]*sql.Stmt)
	}
	c.stmts[query] = st
	return st
}

func (c *batchConn) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st := c.stmt(ctx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return c.conn.ExecContext(ctx, query, args...)
}

func (c *batchConn) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := c.stmt(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return c.conn.QueryRowContext(ctx, query, args...)
}

// close finalises the statements prepared for the batch, before its
// connection goes back to the pool.
func (c *batchConn) close() {
	for _, st := range c.stmts {
		_ = st.Close()
	}
	clear(c.stmts)
}

// holdsWriteLock reports whether q is a transaction known to hold SQLite's
// write lock already: a batch's.
func holdsWriteLock(q querier) bool {
	_, ok := q.(*batchConn)
	return ok
}
