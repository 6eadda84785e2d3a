package durable

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Instance is an instance's row and the head of its inbox, as Get reads
// them.
type Instance struct {
	ID               int64
	FSM              string
	Version          int
	Step             string // the step that runs next (or ran last, once terminal)
	Status           Status
	State            json.RawMessage
	Queue            string
	Priority         int
	Attempt          int
	Reaps            int // how many claims in a row ended with the lease expired (see Config.MaxReaps)
	EligibleAt       time.Time
	ConcurrencyKey   string
	RateLimit        string // the rate-limit bucket, "name" or "name:partition"; "" for none
	RateLimitWeight  int    // the tokens each of its steps takes from RateLimit's bucket
	CorrelationKey   string
	CorrelationScope []Status
	Awaiting         []string  // the signal names of the last Await, until the next progress
	AwaitDeadline    time.Time // zero when none
	LeaseOwner       string    // the engine running the step, while executing (or cancelled while the step still runs)
	LeaseExpiresAt   time.Time
	Result           json.RawMessage // Done's result; nil otherwise
	Error            string          // Stop's reason, or the error the pending retry follows
	InsertedAt       time.Time
	UpdatedAt        time.Time
	FinishedAt       time.Time // zero while live
	// Inbox is the head of the inbox, the signals not yet consumed, oldest
	// first: at most GetInboxLimit of them, and past the first only as
	// many as fit in GetInboxBytes of payload. InboxLen counts them all:
	// it is larger than len(Inbox) when Get left the newer ones out.
	Inbox    []Signal
	InboxLen int
}

// The bounds of the inbox Get returns (Instance.Inbox), so that an
// instance with a huge inbox is inspected in bounded time and memory:
// GetInboxLimit signals at most, and no more payload JSON than
// GetInboxBytes, except that the oldest signal is returned whatever its
// size (at most Config.MaxPayload). The step runner is not bound by them:
// a step sees the whole inbox (Step.Pending).
const (
	GetInboxLimit = 100
	GetInboxBytes = 4 << 20
)

const getSQL = `
SELECT id, fsm, fsm_version, step, status, state, queue, priority, attempt, eligible_at,
       coalesce(concurrency_key, ''), coalesce(correlation_key, ''), correlation_scope,
       awaiting, await_deadline, coalesce(lease_owner, ''), lease_expires_at, result,
       coalesce(error, ''), inserted_at, updated_at, finished_at,
       coalesce(rate_limit, ''), rate_weight, reaps
FROM durable_instance WHERE id = $1`

// inboxHeadSQL reads the oldest $2 signals of instance $1, and of those
// only the first and the ones whose payloads, with those of the signals
// before them, take at most $3 bytes of JSON; inboxLenSQL counts them all.
// The head is sorted by id + 0, not id: ordered by id under a LIMIT, the
// plan may walk the primary key in id order and filter on the instance
// (a generic plan, which estimates every instance to hold the average
// inbox, does once that is large), reading the whole table for an
// instance with few; id + 0 has no index, so the instance's signals are
// read through their own (instance_id, name).
const (
	inboxHeadSQL = `
SELECT id, name, payload, dedup_key, inserted_at FROM (
    SELECT id, name, payload, coalesce(dedup_key, '') AS dedup_key, inserted_at,
           row_number() OVER w AS n, sum(octet_length(payload::text)) OVER w AS upto
    FROM (SELECT * FROM durable_signal WHERE instance_id = $1 ORDER BY id + 0 LIMIT $2) s
    WINDOW w AS (ORDER BY id)
) s
WHERE n = 1 OR upto <= $3
ORDER BY id`
	inboxLenSQL = `SELECT count(*) FROM durable_signal WHERE instance_id = $1`
)

// Get reads the instance with id and the head of its inbox (see
// Instance.Inbox), in one transaction. It returns ErrNotFound when no row
// has id.
func (c *Client) Get(ctx context.Context, id int64) (*Instance, error) {
	var in Instance
	err := pgx.BeginTxFunc(ctx, c.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var (
			version, attempt, weight     int32
			reaps                        int32
			priority                     int16
			scope                        []string
			deadline, leaseExp, finished *time.Time
		)
		err := tx.QueryRow(ctx, getSQL, id).Scan(&in.ID, &in.FSM, &version, &in.Step, &in.Status, &in.State,
			&in.Queue, &priority, &attempt, &in.EligibleAt, &in.ConcurrencyKey, &in.CorrelationKey, &scope,
			&in.Awaiting, &deadline, &in.LeaseOwner, &leaseExp, &in.Result, &in.Error, &in.InsertedAt,
			&in.UpdatedAt, &finished, &in.RateLimit, &weight, &reaps)
		if err != nil {
			return err
		}
		in.Version, in.Attempt, in.Priority = int(version), int(attempt), int(priority)
		in.RateLimitWeight, in.Reaps = int(weight), int(reaps)
		in.CorrelationScope = make([]Status, len(scope))
		for i, s := range scope {
			in.CorrelationScope[i] = Status(s)
		}
		for _, p := range []struct {
			dst *time.Time
			src *time.Time
		}{{&in.AwaitDeadline, deadline}, {&in.LeaseExpiresAt, leaseExp}, {&in.FinishedAt, finished}} {
			if p.src != nil {
				*p.dst = *p.src
			}
		}
		if err := tx.QueryRow(ctx, inboxLenSQL, id).Scan(&in.InboxLen); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, inboxHeadSQL, id, GetInboxLimit, GetInboxBytes)
		if err != nil {
			return err
		}
		in.Inbox, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Signal, error) {
			var s Signal
			err := r.Scan(&s.ID, &s.Name, &s.Payload, &s.DedupKey, &s.InsertedAt)
			return s, err
		})
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: %d", ErrNotFound, id)
	}
	if err != nil {
		return nil, fmt.Errorf("durable: Get: %w", err)
	}
	return &in, nil
}
