package durable

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// claimed is one row a picker leased to this engine: what the step needs,
// and the fence its outcome is committed under.
type claimed struct {
	id             int64
	fsm            string
	version        int
	step           string
	state          []byte
	queue          string
	correlationKey string
	attempt        int
	claims         int64 // the row's claim count when leased: with owner and attempt, the fence
	awaiting       []string
	inbox          []Signal

	mu     sync.Mutex
	cancel context.CancelFunc // of the running step; nil until it runs
	lost   atomic.Bool        // the lease is gone: do not run, or do not trust, the step
}

// awaited returns the signals of the inbox the row's await named.
func (c *claimed) awaited() []Signal {
	if len(c.awaiting) == 0 {
		return nil
	}
	var out []Signal
	for _, s := range c.inbox {
		for _, n := range c.awaiting {
			if s.Name == n {
				out = append(out, s)
				break
			}
		}
	}
	return out
}

// loseLease marks the lease lost and cancels the step if it runs.
func (c *claimed) loseLease() {
	c.lost.Store(true)
	c.mu.Lock()
	cancel := c.cancel
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// claimSQL leases up to $2 runnable rows of one queue ($1) to owner $3 for
// $4 microseconds, in priority then eligible-time order, skipping rows
// other transactions hold (another picker's claim, a signal being
// delivered). It returns each with its inbox, read in the same statement.
const claimSQL = `
WITH picked AS (
    SELECT id FROM durable_instance
    WHERE status = 'runnable' AND queue = $1 AND eligible_at <= now()
    ORDER BY priority, eligible_at, id
    LIMIT $2
    FOR UPDATE SKIP LOCKED
), leased AS (
    UPDATE durable_instance i
    SET status = 'executing', lease_owner = $3,
        lease_expires_at = now() + $4 * interval '1 microsecond',
        claims = i.claims + 1, updated_at = now()
    FROM picked
    WHERE i.id = picked.id
    RETURNING i.id, i.fsm, i.fsm_version, i.step, i.state, i.correlation_key, i.attempt, i.claims,
              i.awaiting, i.priority, i.eligible_at
)
SELECT l.id, l.fsm, l.fsm_version, l.step, l.state, coalesce(l.correlation_key, ''), l.attempt,
       l.claims, l.awaiting,
       (SELECT coalesce(json_agg(json_build_object(
                   'ID', s.id, 'Name', s.name, 'Payload', s.payload,
                   'DedupKey', coalesce(s.dedup_key, ''), 'InsertedAt', s.inserted_at) ORDER BY s.id), '[]')
        FROM durable_signal s WHERE s.instance_id = l.id)
FROM leased l
ORDER BY l.priority, l.eligible_at, l.id`

// claim leases up to n runnable rows of queue to owner.
func claim(ctx context.Context, db dbtx, queue string, n int, owner string, ttl time.Duration) ([]*claimed, error) {
	rows, err := db.Query(ctx, claimSQL, queue, n, owner, ttl.Microseconds())
	if err != nil {
		return nil, err
	}
	var (
		out   []*claimed
		inbox []byte
	)
	for rows.Next() {
		c := &claimed{queue: queue}
		var version, attempt int32
		if err := rows.Scan(&c.id, &c.fsm, &version, &c.step, &c.state, &c.correlationKey, &attempt,
			&c.claims, &c.awaiting, &inbox); err != nil {
			rows.Close()
			return nil, err
		}
		c.version, c.attempt = int(version), int(attempt)
		if err := json.Unmarshal(inbox, &c.inbox); err != nil {
			rows.Close()
			return nil, fmt.Errorf("inbox of instance %d: %w", c.id, err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// releaseSQL hands claimed rows that never ran back: runnable again, with
// their attempt unchanged. Only rows still leased under the same claim
// are touched.
const releaseSQL = `
UPDATE durable_instance i
SET status = 'runnable', lease_owner = NULL, lease_expires_at = NULL, updated_at = now()
FROM unnest($2::bigint[], $3::bigint[]) AS r(id, claims)
WHERE i.id = r.id AND i.claims = r.claims AND i.status = 'executing' AND i.lease_owner = $1`

// release hands cs back and returns how many rows it changed.
func release(ctx context.Context, db dbtx, owner string, cs []*claimed) (int, error) {
	if len(cs) == 0 {
		return 0, nil
	}
	ids, claims := fence(cs)
	tag, err := db.Exec(ctx, releaseSQL, owner, ids, claims)
	return int(tag.RowsAffected()), err
}

// fence returns the ids and claim counts of cs.
func fence(cs []*claimed) (ids, claims []int64) {
	ids, claims = make([]int64, len(cs)), make([]int64, len(cs))
	for i, c := range cs {
		ids[i], claims[i] = c.id, c.claims
	}
	return ids, claims
}
