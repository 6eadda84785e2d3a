package idem

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/idemgo/idem/internal/backoff"
	"github.com/idemgo/idem/internal/pgstorable"
)

// settleRetryBudget bounds the repeats of a settle call whose context
// has no deadline of its own.
const settleRetryBudget = 10 * time.Second

// recordOutcome makes call, a settle call recording the outcome of work
// that has run (Commit, FailPermanent) under lease, with ctx, and makes it
// again while it fails with ErrUnavailable: until it succeeds, fails
// otherwise (the lease is stale, the outcome too large), or ctx ends (or,
// when ctx has no deadline, settleRetryBudget has passed); it returns
// call's last error.
//
// The work's effect has happened: an outcome not recorded leaves a retry
// to run the work again. A store that failed once (a connection dropped,
// a failover, a server restarting) often answers the next call, and a
// settle call is safe to repeat under the same lease (see Store). A store
// may answer the repeat of a call that was applied, its reply lost, with
// ErrStaleToken: the record is then read, and when it is settled under
// lease's fence as recorded says (the outcome given), the call counts as
// having succeeded. A store bound to a transaction is called once: a
// failed statement ends the transaction, and the caller's writes with it.
// beforeRepeat, when not nil, is called once, before the first repeat.
func recordOutcome(ctx context.Context, s Store, key Key, lease Lease, call func(context.Context) error, recorded func(Record) bool, beforeRepeat func()) error {
	err := call(ctx)
	if err == nil || !errors.Is(err, ErrUnavailable) {
		return err
	}
	if tb, ok := s.(TxBound); ok && tb.TxBound() {
		return err
	}
	if beforeRepeat != nil {
		beforeRepeat()
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, settleRetryBudget)
		defer cancel()
	}
	backoff.Repeat(ctx, func() bool {
		err = call(ctx)
		if errors.Is(err, ErrStaleToken) {
			if rec, gerr := s.Get(ctx, key); gerr == nil && rec.Fence == lease.Fence && recorded(rec) {
				err = nil
			}
		}
		return err == nil || !errors.Is(err, ErrUnavailable) || ctx.Err() != nil
	})
	return err
}

// committed returns recordOutcome's test of a Commit of result: the
// record is committed with that result.
func committed(result []byte) func(Record) bool {
	return func(rec Record) bool { return rec.Status == StatusCommitted && bytes.Equal(rec.Result, result) }
}

// failedWith returns recordOutcome's test of a FailPermanent of e: the
// record is failed with that error, as a store keeps it (see keptAs).
func failedWith(e StoredError) func(Record) bool {
	want := keptAs(e)
	return func(rec Record) bool {
		return rec.Status == StatusFailed && rec.Error != nil && keptAs(*rec.Error) == want
	}
}

// keptAs returns e with what a store may replace in keeping it replaced:
// each byte that is not part of valid UTF-8 (every store that keeps it as
// JSON, as encoding/json does) and each NUL character (pgstore, as jsonb
// has none) becomes U+FFFD. Two errors a store keeps alike compare equal.
func keptAs(e StoredError) StoredError {
	clean := pgstorable.CleanText
	return StoredError{Class: clean(e.Class), Message: clean(e.Message), Cause: clean(e.Cause)}
}

// CommitRetrying commits result as the outcome of the reservation held by
// lease, as s.Commit does, for a caller settling by hand the work it has
// run (a message handled, a request served), and makes the call again
// while it fails with ErrUnavailable: a store that failed once (a
// connection dropped, a failover, a server restarting) often answers the
// next call, and a Commit is safe to repeat under the same lease. It
// waits 10 ms before the first repeat, then twice as long each time, at
// most 500 ms, until the Commit succeeds, fails otherwise (ErrStaleToken,
// a result too large), or ctx ends; with no deadline in ctx, it stops
// repeating 10 s after the first call. A repeat answered ErrStaleToken
// after a Commit that was applied, its reply lost, counts as a success
// when the record holds result under lease's fence. A store bound to a
// transaction (TxBound) is called once: a failed statement ends the
// transaction. The error is the last call's. Do and Owner.Run commit so.
func CommitRetrying(ctx context.Context, s Store, key Key, lease Lease, result []byte) error {
	return commitRetrying(ctx, s, key, lease, result, nil)
}

// commitRetrying is CommitRetrying, calling beforeRepeat (when not nil)
// once, before the first repeat.
func commitRetrying(ctx context.Context, s Store, key Key, lease Lease, result []byte, beforeRepeat func()) error {
	return recordOutcome(ctx, s, key, lease, func(ctx context.Context) error { return s.Commit(ctx, key, lease, result) }, committed(result), beforeRepeat)
}
