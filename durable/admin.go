package durable

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
)

// ListOpts filter and page Client.List. A nil *ListOpts lists the first
// DefaultListLimit instances.
type ListOpts struct {
	// Status, Queue, FSM and CorrelationKey, when set, keep only the
	// instances that match all of them.
	Status         Status
	Queue          string
	FSM            string
	CorrelationKey string
	// AfterID pages: only instances with a larger id are listed.
	AfterID int64
	// Limit is the most instances listed. Defaults to DefaultListLimit;
	// at most MaxListLimit.
	Limit int
}

// List limits.
const (
	DefaultListLimit = 100
	MaxListLimit     = 10000
)

// Summary is one instance as List shows it: its row without state, result
// or inbox (Get reads those).
type Summary struct {
	ID             int64     `json:"id"`
	FSM            string    `json:"fsm"`
	Version        int       `json:"version"`
	Step           string    `json:"step"`
	Status         Status    `json:"status"`
	Queue          string    `json:"queue"`
	Priority       int       `json:"priority"`
	Attempt        int       `json:"attempt"`
	CorrelationKey string    `json:"correlation_key,omitempty"`
	EligibleAt     time.Time `json:"eligible_at"`
	UpdatedAt      time.Time `json:"updated_at"`
	Error          string    `json:"error,omitempty"`
}

const listSQL = `
SELECT id, fsm, fsm_version, step, status, queue, priority, attempt,
       coalesce(correlation_key, ''), eligible_at, updated_at, coalesce(error, '')
FROM durable_instance
WHERE id > $1
  AND ($2 = '' OR status = $2)
  AND ($3 = '' OR queue = $3)
  AND ($4 = '' OR fsm = $4)
  AND ($5 = '' OR correlation_key = $5)
ORDER BY id
LIMIT $6`

// List returns the instances that match opts, in id order. It is meant for
// operators (idem durable list): it reads the table directly and is not
// tuned for large scans. A filter PostgreSQL cannot store (a NUL, invalid
// UTF-8) fails with ErrUnstorable.
func (c *Client) List(ctx context.Context, opts *ListOpts) ([]Summary, error) {
	var o ListOpts
	if opts != nil {
		o = *opts
	}
	switch {
	case o.Limit < 0 || o.Limit > MaxListLimit:
		return nil, fmt.Errorf("durable: ListOpts.Limit must be between 0 and %d", MaxListLimit)
	case o.Limit == 0:
		o.Limit = DefaultListLimit
	}
	if o.Status != "" && !o.Status.valid() {
		return nil, fmt.Errorf("durable: ListOpts.Status: unknown status %q", o.Status)
	}
	// Text a column cannot store would fail the statement with the
	// database's encoding error: no instance carries it.
	for _, f := range [...]struct{ what, s string }{
		{"ListOpts.Queue", o.Queue}, {"ListOpts.FSM", o.FSM}, {"ListOpts.CorrelationKey", o.CorrelationKey},
	} {
		if err := checkText(f.what, f.s); err != nil {
			return nil, err
		}
	}
	rows, err := c.pool.Query(ctx, listSQL, o.AfterID, string(o.Status), o.Queue, o.FSM, o.CorrelationKey, o.Limit)
	if err != nil {
		return nil, fmt.Errorf("durable: List: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Summary, error) {
		var s Summary
		var version, attempt int32
		var priority int16
		err := r.Scan(&s.ID, &s.FSM, &version, &s.Step, &s.Status, &s.Queue, &priority, &attempt,
			&s.CorrelationKey, &s.EligibleAt, &s.UpdatedAt, &s.Error)
		s.Version, s.Attempt, s.Priority = int(version), int(attempt), int(priority)
		return s, err
	})
	if err != nil {
		return nil, fmt.Errorf("durable: List: %w", err)
	}
	return out, nil
}

// QueueStats counts a queue's instances.
type QueueStats struct {
	Queue string `json:"queue"`
	// Counts holds the number of instances per status; statuses without
	// instances are absent.
	Counts map[Status]int `json:"counts"`
	// OldestRunnable is how long the oldest instance that is runnable now
	// (eligible_at in the past) has been waiting; zero when none waits,
	// and the longest Duration past that (some 292 years). Both are measured by the database's clock, as the pickers measure
	// them, not by the caller's.
	OldestRunnable time.Duration `json:"oldest_runnable_ns"`
}

const statsSQL = `
SELECT queue, status, count(*),
       coalesce(extract(epoch FROM now() - min(eligible_at) FILTER (WHERE status = 'runnable' AND eligible_at <= now())), 0)
FROM durable_instance
GROUP BY queue, status
ORDER BY queue, status`

// Stats counts the instances by queue and status, with the age of the
// oldest runnable instance of each queue (idem durable stats), by the
// database's clock.
func (c *Client) Stats(ctx context.Context) ([]QueueStats, error) {
	rows, err := c.pool.Query(ctx, statsSQL)
	if err != nil {
		return nil, fmt.Errorf("durable: Stats: %w", err)
	}
	defer rows.Close()
	var out []QueueStats
	for rows.Next() {
		var queue string
		var status Status
		var n int64
		var oldest float64
		if err := rows.Scan(&queue, &status, &n, &oldest); err != nil {
			return nil, fmt.Errorf("durable: Stats: %w", err)
		}
		if len(out) == 0 || out[len(out)-1].Queue != queue {
			out = append(out, QueueStats{Queue: queue, Counts: map[Status]int{}})
		}
		q := &out[len(out)-1]
		q.Counts[status] = int(n)
		if d := secondsToDuration(oldest); d > q.OldestRunnable {
			q.OldestRunnable = d
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("durable: Stats: %w", err)
	}
	return out, nil
}

// secondsToDuration is s seconds as a Duration, the longest one when s is
// more than a Duration holds (an instance eligible since centuries).
func secondsToDuration(s float64) time.Duration {
	if ns := s * float64(time.Second); ns < math.MaxInt64 {
		return time.Duration(ns)
	}
	return math.MaxInt64
}

// lookupByKeySQL finds, without locking them, up to two of the live
// instances that carry key $1, in their scope or with an empty scope:
// those Signal(ByKey(key)) and Cancel(ByKey(key)) address (lockByKey).
const lookupByKeySQL = `
SELECT id FROM durable_instance
WHERE id IN (SELECT id FROM durable_instance WHERE correlation_guard = $1
             UNION ALL
             SELECT id FROM durable_instance
             WHERE correlation_key = $1 AND cardinality(correlation_scope) = 0)
  AND status IN ('runnable', 'executing', 'awaiting_signal', 'awaiting_children')
LIMIT 2`

// Lookup returns the id of the live instance that Signal(ByKey(key), …)
// reaches. It returns ErrNoTarget when no live instance carries key, and
// ErrAmbiguousTarget when several carry it without uniqueness.
func (c *Client) Lookup(ctx context.Context, key string) (int64, error) {
	if key == "" {
		return 0, errors.New("durable: Lookup: empty correlation key")
	}
	if err := ByKey(key).check(); err != nil {
		return 0, err
	}
	return lookupKey(ctx, c.pool, ByKey(key), "Lookup")
}
