package pgstore

import (
	"context"
	"time"

	"github.com/idemgo/idem"
)

// PurgeExpired implements idem.Store. In transactional mode every batch
// runs in the caller's transaction.
func (b binding) PurgeExpired(ctx context.Context, ns idem.Namespace, asOf time.Time) (int, error) {
	if err := ns.Validate(); err != nil {
		return 0, err
	}
	if b.q == nil {
		return 0, errNoPool
	}
	batch := b.s.cfg.PurgeBatch
	total := 0
	for {
		if err := ctx.Err(); err != nil {
			return total, ctxError("PurgeExpired", err, nil)
		}
		n, err := b.q.exec(ctx, b.s.sql.purge, string(ns), asOf, batch)
		if err != nil {
			return total, classify(ctx, "PurgeExpired", err)
		}
		total += int(n)
		if n < int64(batch) {
			return total, nil
		}
	}
}
