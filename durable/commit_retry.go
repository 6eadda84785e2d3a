package durable

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemgo/idem/internal/backoff"
)

// claimHeldSQL counts the row $1 if engine $2 still holds its lease under
// the claim count $3: after a commit under that claim was fenced off,
// the row was cancelled while the step ran (Cancel keeps an executing
// row's lease), as no commit under the claim can have been applied (a
// commit clears the lease, and a later claim counts up). It does not
// lock.
const claimHeldSQL = `SELECT count(*) FROM durable_instance WHERE id = $1 AND lease_owner = $2 AND claims = $3`

// commitOutcome commits r, the outcome of the step c ran, as commit does,
// and makes the commit again while it fails because the connection or
// the server failed, or the server rolled it back as a deadlock's victim
// (see passesWhenRepeated), after 10 ms, then twice as
// long each time, at most 500 ms: until it succeeds, fails otherwise, ctx
// ends (commitContext ends it once c's lease may have expired, the
// heartbeat extending the lease meanwhile), or the lease as it stood at
// the first failure may have expired, however the heartbeat extended it
// since (the row is then left to the reaper, as a commit that failed
// otherwise leaves it). The step's effect has
// happened: an outcome not committed leaves the row to the reaper and the
// step to run again. A commit is safe to make again under the same fence:
// once one is applied, the others match no row.
//
// A commit applied whose reply was lost makes the repeat fenced off. A
// repeat fenced off after a failed attempt is therefore told apart from a
// lost lease by reading the row (claimHeldSQL): within the lease, the
// claim is lost only to a cancel, which leaves the row's lease to the
// claim; any other row moved on under this commit. The commit then counts
// as committed, its result told by the outcome alone (see
// appliedResult). When that cannot be told, the row's lease having
// perhaps expired before the read (the reaper may then have taken it), it
// counts as fenced off, as a commit fenced at once does.
func (e *engine) commitOutcome(ctx context.Context, c *claimed, r ranStep) (commitResult, error) {
	res, err := commit(ctx, e.c.pool, e.owner, c, r)
	if err == nil || !passesWhenRepeated(ctx, err) {
		return res, err
	}
	e.c.cfg.Logger.Warn("durable: outcome commit failed; trying again while the lease lasts",
		slog.Int64("id", c.id), slog.String("step", c.step), slog.Int("attempt", c.attempt), slog.Any("error", err))
	// The repeats end with the lease as it stood when the commit failed,
	// not as the heartbeat extends it since: a server refusing this
	// commit alone, while the heartbeat's statements succeed (a
	// statement timeout the commit always overruns, a file that cannot
	// be read), would keep the row, and its engine's slot, forever.
	repeatsEnd := c.leaseEnd.Load()
	backoff.Repeat(ctx, func() bool {
		if monoNow() >= repeatsEnd {
			return true
		}
		res, err = commit(ctx, e.c.pool, e.owner, c, r)
		if err == nil && !res.committed {
			var held int
			if err = e.c.pool.QueryRow(ctx, claimHeldSQL, c.id, e.owner, c.claims).Scan(&held); err == nil {
				if held == 0 && c.leaseLeft() > 0 {
					res = appliedResult(c, r)
				}
				return true
			}
			if !passesWhenRepeated(ctx, err) {
				err = nil // fenced off, as far as can be told
				return true
			}
		}
		return err == nil || !passesWhenRepeated(ctx, err)
	})
	return res, err
}

// appliedResult is the result of the commit of r, the outcome of the step
// c ran, that was applied though its reply was lost, as far as the
// outcome tells it: the row's own moves (runnable, later, parked, ended),
// not the other rows it woke or ended (a Cancel's descendants), whose
// Waits and pickers learn of them by polling or by the wake-up hints the
// commit sent.
func appliedResult(c *claimed, r ranStep) commitResult {
	o := r.outcome
	res := commitResult{committed: true}
	switch o.kind {
	case KindNext, KindChildren:
		res.runnable = true // a poke, at worst needless
	case KindRetry:
		res.runnable, res.later = o.delay == 0, o.delay
	case KindAwait:
		res.parkedFor = o.timeout
	case KindDone, KindStop, KindCancel:
		res.ended = []int64{c.id}
	}
	return res
}

// passesWhenRepeated reports whether err, from a statement run under ctx
// that has not ended, says that the connection to the server, or the
// server, failed, rather than the statement, or that the server rolled
// the transaction back for another's sake: the same statement may
// succeed on another connection, or once the server is back. So do the
// errors that come before anything is sent (pgconn.SafeToRetry), those
// of the network and of connecting, a connection closed under the
// statement, and the server's errors of classes 08 (connection
// exception), 53 (insufficient resources), 57 (operator intervention:
// an administrator's shutdown or termination, a server starting or
// crashed) and 58 (system error); and, as a transaction the server rolled
// back for another's sake that the same statements pass when made again,
// a deadlock's victim (40P01) and a serialization failure (40001). Not so
// a value the server refuses, a constraint, a missing table, nor any
// other error the server reports.
func passesWhenRepeated(ctx context.Context, err error) bool {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		if pe.Code == "40P01" || pe.Code == "40001" {
			return true
		}
		switch pe.Code[:min(2, len(pe.Code))] {
		case "08", "53", "57", "58":
			return true
		}
		return false
	}
	var (
		ne net.Error
		ce *pgconn.ConnectError
	)
	return pgconn.SafeToRetry(err) || errors.As(err, &ne) || errors.As(err, &ce) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, pgconn.ErrConnClosed)
}
