package durable

import (
	"context"
	"strings"
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

const bucketStatsSQL = `
SELECT b.key, b.tokens, b.updated_at, extract(epoch FROM $1::timestamptz - b.updated_at)::float8,
       (SELECT count(*) FROM durable_instance i WHERE i.status = 'runnable' AND i.rate_limit = b.key)
FROM durable_rate_limit_bucket b
ORDER BY b.key`

// RateLimitStats lists the rate-limit buckets, with the tokens each holds
// and the runnable instances waiting on it (idem durable buckets).
func (c *Client) RateLimitStats(ctx context.Context) ([]BucketStats, error) {
	rows, err := c.pool.Query(ctx, bucketStatsSQL, time.Now())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []BucketStats{}
	for rows.Next() {
		var (
			b       BucketStats
			stored  *float64
			elapsed float64 // seconds
			waiting int64
		)
		if err := rows.Scan(&b.Key, &stored, &b.UpdatedAt, &elapsed, &waiting); err != nil {
			return nil, err
		}
		b.Waiting = int(waiting)
		name, _, _ := strings.Cut(b.Key, ":")
		rl, known := c.cfg.RateLimits[name]
		b.Known = known
		switch {
		case known && stored == nil: // created full, never drawn from
			b.Tokens = float64(rl.Burst)
		case known:
			b.Tokens = min(float64(rl.Burst), *stored+rl.rate()*max(elapsed, 0))
		case stored != nil:
			b.Tokens = *stored
		}
		out = append(out, b)
	}
	return out, rows.Err()
}
