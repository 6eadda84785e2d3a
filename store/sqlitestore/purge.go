package sqlitestore

import (
	"context"
	"time"

	"github.com/idemgo/idem"
)

// purgeBatch is how many records PurgeExpired deletes per statement.
const purgeBatch = 1000

func (s *Store) purgeExpired(ctx context.Context, q querier, ns idem.Namespace, asOf time.Time) (int, error) {
	if err := ns.Validate(); err != nil {
		return 0, err
	}
	total := 0
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		res, err := q.ExecContext(ctx, s.sql.purge, string(ns), micros(asOf), purgeBatch)
		if err != nil {
			return total, dbError(ctx, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, dbError(ctx, err)
		}
		total += int(n)
		if n < purgeBatch {
			return total, nil
		}
	}
}
