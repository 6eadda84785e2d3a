package pgstore

import (
	"context"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/internal/pgstorable"
)

// PurgeExpired implements idem.Store. In transactional mode every batch
// runs in the caller's transaction.
func (b binding) PurgeExpired(ctx context.Context, ns idem.Namespace, asOf time.Time) (int, error) {
	if err := ns.Validate(); err != nil {
		return 0, err
	}
	if b.q == nil {
		return 0, b.noQuerier()
	}
	// asOf outside timestamptz's range would be refused, or encoded as
	// another time (far enough ahead, one in 1970); at the range's end
	// it selects the same records: no stored time lies beyond it.
	asOf = pgstorable.ClampTime(asOf)
	batch := b.s.cfg.PurgeBatch
	total := 0
	for {
		if err := ctx.Err(); err != nil {
			return total, ctxError("PurgeExpired", err, nil)
		}
		n, err := b.exec(ctx, b.s.sql.purge, string(ns), asOf, batch)
		if err != nil {
			return total, classify(ctx, "PurgeExpired", err)
		}
		total += int(n)
		if n < int64(batch) {
			return total, nil
		}
	}
}
