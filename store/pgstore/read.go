package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/idemgo/idem"
	"github.com/jackc/pgx/v5/pgtype"
)

// Get implements idem.Store. In transactional mode it sees the caller's
// uncommitted writes.
func (b binding) Get(ctx context.Context, key idem.Key) (idem.Record, error) {
	if key.IsZero() {
		return idem.Record{}, fmt.Errorf("pgstore: Get: %w", idem.ErrInvalidKey)
	}
	if b.q == nil {
		return idem.Record{}, b.noQuerier()
	}
	if err := ctx.Err(); err != nil {
		return idem.Record{}, ctxError("Get", err, nil)
	}
	ns, scope, value := keyArgs(key)
	var (
		status                     string
		hash, reqP, resP, errP     []byte
		fence                      int64
		created, expires, leaseEnd pgtype.Timestamptz
	)
	err := b.q.queryRow(ctx, b.s.sql.get, []any{ns, scope, value, b.now()},
		&status, &hash, &reqP, &resP, &errP, &fence, &created, &expires, &leaseEnd)
	if errors.Is(err, errNoRows) {
		return idem.Record{}, fmt.Errorf("pgstore: Get: %w", idem.ErrNotFound)
	}
	if err != nil {
		return idem.Record{}, classify(ctx, "Get", err)
	}
	rec, err := record(key, status, hash, reqP, resP, errP, fence, created, expires, leaseEnd)
	if err != nil {
		return idem.Record{}, corruptError("Get", "record", err)
	}
	return rec, nil
}
