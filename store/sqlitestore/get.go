package sqlitestore

import (
	"context"
	"database/sql"
	"errors"

	"github.com/idemgo/idem"
)

func (s *Store) get(ctx context.Context, q querier, key idem.Key) (idem.Record, error) {
	if key.IsZero() {
		return idem.Record{}, &idem.KeyError{Kind: idem.ErrKeyEmpty, Detail: "zero Key"}
	}
	if err := ctx.Err(); err != nil {
		return idem.Record{}, err
	}
	row := q.QueryRowContext(ctx, s.sql.get, string(key.Namespace()), key.Scope(), key.Value(), s.now())
	rec, err := scanRecord(row, key)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return idem.Record{}, idem.ErrNotFound
	case err != nil:
		return idem.Record{}, readError(ctx, err)
	}
	return rec, nil
}
