package pgstore

import (
	"context"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/idemgo/idem"
)

// Commit implements idem.Store.
func (b binding) Commit(ctx context.Context, key idem.Key, lease idem.Lease, result []byte) error {
	if err := idem.CheckLease(key, lease); err != nil {
		return err
	}
	if b.q == nil {
		return b.noQuerier()
	}
	// CheckPayload's JSON and UTF-8 checks are all the json column needs.
	if err := idem.CheckPayload("result", result, b.s.cfg.MaxPayload); err != nil {
		return err
	}
	sql := b.s.sql.commit
	if b.tx {
		sql = b.s.sql.commitTx
	}
	return b.settle(ctx, "Commit", sql, b.s.sql.commitDone, key, lease, b.now(), jsonArg(result))
}

// FailPermanent implements idem.Store.
func (b binding) FailPermanent(ctx context.Context, key idem.Key, lease idem.Lease, e idem.StoredError) error {
	if err := idem.CheckLease(key, lease); err != nil {
		return err
	}
	if b.q == nil {
		return b.noQuerier()
	}
	enc, err := encodeError(e, b.s.cfg.MaxPayload)
	if err != nil {
		return err
	}
	sql := b.s.sql.failPermanent
	if b.tx {
		sql = b.s.sql.failPermanentTx
	}
	return b.settle(ctx, "FailPermanent", sql, b.s.sql.failPermanentDone, key, lease, b.now(), jsonArg(enc))
}

// FailTransient implements idem.Store.
func (b binding) FailTransient(ctx context.Context, key idem.Key, lease idem.Lease) error {
	if err := idem.CheckLease(key, lease); err != nil {
		return err
	}
	if b.q == nil {
		return b.noQuerier()
	}
	sql := b.s.sql.failTransient
	if b.tx {
		sql = b.s.sql.failTransientTx
	}
	return b.settle(ctx, "FailTransient", sql, "", key, lease, b.now())
}

// Heartbeat implements idem.Store.
func (b binding) Heartbeat(ctx context.Context, key idem.Key, lease idem.Lease, extend time.Duration) (idem.Lease, error) {
	if err := idem.CheckLease(key, lease); err != nil {
		return idem.Lease{}, err
	}
	if b.q == nil {
		return idem.Lease{}, b.noQuerier()
	}
	if extend <= 0 {
		extend = b.s.cfg.Lease
	}
	sql := b.s.sql.heartbeat
	if b.tx {
		sql = b.s.sql.heartbeatTx
	}
	now := b.now()
	end := after(now, extend)
	if err := b.settle(ctx, "Heartbeat", sql, "", key, lease, now, end); err != nil {
		return idem.Lease{}, err
	}
	return idem.Lease{Token: lease.Token, Fence: lease.Fence, ExpiresAt: end, TTL: extend}, nil
}

// settle runs one of the fenced statements: it changes the record only if
// lease is its current reservation (token, fence, in_progress, not
// expired at now), and reports ErrStaleToken when it changed nothing.
// value is the statement's own parameter ($7), if any; in transactional
// mode the lock text follows it.
//
// When nothing changed and done is set, done counts the records already
// settled by this lease with this value: a repetition of a call whose
// reply was lost, which then succeeds (the store contract allows nil or
// ErrStaleToken; nil tells the caller what it needs to know). This costs a
// second round trip on the stale path only.
func (b binding) settle(ctx context.Context, op, sql, done string, key idem.Key, lease idem.Lease, now time.Time, value ...any) error {
	if b.q == nil {
		return b.noQuerier()
	}
	if !storableText(lease.Token) {
		// No record holds such a token, so the lease is not current.
		// Sent, it would be an error of the server, which in
		// transactional mode aborts the caller's transaction.
		return staleError(op)
	}
	if err := ctx.Err(); err != nil {
		return ctxError(op, err, nil)
	}
	ns, scope, v := keyArgs(key)
	args := make([]any, 0, 8) // room for the lock text
	args = append(append(args, ns, scope, v, lease.Token, lease.Fence, now), value...)
	doneArgs := args // without the lock text
	if b.tx {
		args = append(args, lockText(b.s.table, key))
	}
	n, err := b.exec(ctx, sql, args...)
	if err != nil {
		return classify(ctx, op, err)
	}
	if n > 0 {
		return nil
	}
	if done != "" {
		var same int64
		if err := b.q.queryRow(ctx, done, doneArgs, &same); err != nil {
			return classify(ctx, op, err)
		}
		if same > 0 {
			return nil
		}
	}
	return staleError(op)
}

// storableText reports whether PostgreSQL can hold s as text: valid UTF-8
// without NUL characters.
func storableText(s string) bool {
	return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}

// exec runs one statement through b's querier. In lease mode a statement
// that meets a serialization failure (see retryable) runs again, up to
// maxBeginAttempts times in all, on a new snapshot.
func (b binding) exec(ctx context.Context, sql string, args ...any) (int64, error) {
	n, err := b.q.exec(ctx, sql, args...)
	for attempts := 1; attempts < maxBeginAttempts && b.retryable(ctx, err); attempts++ {
		n, err = b.q.exec(ctx, sql, args...) // a record changed meanwhile: look again
	}
	return n, err
}
