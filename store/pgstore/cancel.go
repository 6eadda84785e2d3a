package pgstore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// cancelGrace is how long after a caller's context ends a lease-mode
// statement is given to end on the server, cancelled or completed, before
// its connection is cut.
const cancelGrace = time.Second

// poolQuerier is the lease-mode querier on a pool. A caller's context that
// ends while a statement runs does not cut the connection under it, as
// pgx would: the server would run the statement on to its end all the
// same (a Begin waiting for a row would reserve the key once the row is
// free, under a lease nobody holds). It asks the server to cancel the
// statement instead, and waits for the statement's end: cancelled, it
// wrote nothing, and the call reports the context's end; completed first,
// its answer is the call's (a Begin's lease, which idem.Do releases). Only
// if neither comes within cancelGrace (a server that does not answer) is
// the connection cut, leaving the statement's fate unknown, as with any
// lost connection. A connection that was sent a cancel request is closed,
// not put back in the pool, since the request may reach the server after
// the statement ended, and cancel the next one.
type poolQuerier struct{ pool *pgxpool.Pool }

func (q poolQuerier) queryRow(ctx context.Context, query string, args []any, dest ...any) error {
	return q.run(ctx, func(qctx context.Context, c *pgxpool.Conn) error {
		return pgxQuerier{c}.queryRow(qctx, query, args, dest...)
	})
}

func (q poolQuerier) exec(ctx context.Context, query string, args ...any) (int64, error) {
	var n int64
	err := q.run(ctx, func(qctx context.Context, c *pgxpool.Conn) error {
		var err error
		n, err = pgxQuerier{c}.exec(qctx, query, args...)
		return err
	})
	return n, err
}

// run runs f on a connection of the pool with a context that keeps ctx's
// values, and ends only cancelGrace after ctx if f has not returned by
// then; when ctx ends first, the server is asked to cancel f's statement.
func (q poolQuerier) run(ctx context.Context, f func(context.Context, *pgxpool.Conn) error) error {
	conn, err := q.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	qctx, cut := context.WithCancel(context.WithoutCancel(ctx))
	asked := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(asked)
		cancelThenCut(qctx, conn.Conn().PgConn(), cut) // qctx is cut when f returns
	})
	err = f(qctx, conn)
	cut()
	if !stop() {
		<-asked
		closeAsked(conn.Conn())
	}
	conn.Release()
	return err
}

// cancelThenCut asks the server to cancel the statement pc runs, and
// gives it until ctx ends (the statement's answer was read) or for
// cancelGrace, whichever comes first, before it cuts the statement's
// context.
func cancelThenCut(ctx context.Context, pc *pgconn.PgConn, cut context.CancelFunc) {
	gctx, cancel := context.WithTimeout(ctx, cancelGrace)
	defer cancel()
	if pc.CancelRequest(gctx) == nil {
		<-gctx.Done()
	}
	cut()
}

// closeAsked closes a connection that may have been sent a cancel
// request, rather than let the pool reuse it: the request may still be
// on its way, and would cancel the connection's next statement.
func closeAsked(c *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), cancelGrace)
	defer cancel()
	_ = c.Close(ctx)
}
