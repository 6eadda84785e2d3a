package durable

import (
	"context"
	"fmt"
	"time"
)

// BucketStats describes one rate-limit bucket, as RateLimitStats reads it.
type BucketStats struct {
	// Key is the bucket's key: "name" or "name:partition".
	Key string `json:"key"`
	// Tokens is how many tokens the bucket holds now: the stored count
	// refilled by the time since it was stored, at the rate this client's
	// Config.RateLimits gives the name. A name this client does not know
	// shows the stored count, and Known is false.
	Tokens float64 `json:"tokens"`
	// Known reports whether this client's Config.RateLimits has the name.
	Known bool `json:"known"`
	// Waiting is how many runnable instances name the bucket.
	Waiting int `json:"waiting"`
	// UpdatedAt is when a picker last took tokens from the bucket.
	UpdatedAt time.Time `json:"updated_at"`
}

// bucketStatsSQL lists the buckets with their tokens now, refilled as the
// claim refills them (bucketTokensSQL) for the names of $1–$3 (names,
// tokens per second, bursts), as stored for other names.
const bucketStatsSQL = `
SELECT b.key, c.name IS NOT NULL,
       CASE WHEN c.name IS NULL THEN coalesce(b.tokens, 0) ELSE ` + bucketTokensSQL + ` END,
       b.updated_at,
       (SELECT count(*) FROM durable_instance i WHERE i.status = 'runnable' AND i.rate_limit = b.key)
FROM durable_rate_limit_bucket b
LEFT JOIN unnest($1::text[], $2::float8[], $3::float8[]) AS c(name, rate, burst)
       ON c.name = split_part(b.key, ':', 1)
ORDER BY b.key`

// RateLimitStats lists the rate-limit buckets, with the tokens each holds
// and the runnable instances waiting on it (idem durable buckets).
func (c *Client) RateLimitStats(ctx context.Context) ([]BucketStats, error) {
	rl := newRateLimits(c.cfg.RateLimits)
	rows, err := c.pool.Query(ctx, bucketStatsSQL, rl.names, rl.rates, rl.bursts)
	if err != nil {
		return nil, fmt.Errorf("durable: RateLimitStats: %w", err)
	}
	defer rows.Close()
	out := []BucketStats{}
	for rows.Next() {
		var (
			b       BucketStats
			waiting int64
		)
		if err := rows.Scan(&b.Key, &b.Known, &b.Tokens, &b.UpdatedAt, &waiting); err != nil {
			return nil, fmt.Errorf("durable: RateLimitStats: %w", err)
		}
		b.Waiting = int(waiting)
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("durable: RateLimitStats: %w", err)
	}
	return out, nil
}
