package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// connect opens a pool on the database url names (DATABASE_URL) and
// checks, for up to timeout, that it answers, so that a missing URL, a
// database that is down and one that never answers are each said plainly
// at once, rather than as the bare "context deadline exceeded" of the
// checkout's own time limit.
func connect(ctx context.Context, url string, timeout time.Duration) (*pgxpool.Pool, error) {
	if url == "" {
		return nil, errors.New("DATABASE_URL is not set: set it to a PostgreSQL database to keep the checkout in, e.g. DATABASE_URL=postgres://localhost/checkout")
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("the database in DATABASE_URL (%s:%d) did not answer within %s", pool.Config().ConnConfig.Host, pool.Config().ConnConfig.Port, timeout)
		}
		return nil, fmt.Errorf("cannot connect to the database in DATABASE_URL: %w", err)
	}
	return pool, nil
}
