package durable

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Instance is an instance's row and inbox, as Get reads them.
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
	Inbox            []Signal  // the signals not yet consumed, oldest first
}

const getSQL = `
SELECT id, fsm, fsm_version, step, status, state, queue, priority, attempt, eligible_at,
       coalesce(concurrency_key, ''), coalesce(correlation_key, ''), correlation_scope,
       awaiting, await_deadline, coalesce(lease_owner, ''), lease_expires_at, result,
       coalesce(error, ''), inserted_at, updated_at, finished_at,
       coalesce(rate_limit, ''), rate_weight, reaps
FROM durable_instance WHERE id = $1`

const inboxSQL = `
SELECT id, name, payload, coalesce(dedup_key, ''), inserted_at
FROM durable_signal WHERE instance_id = $1 ORDER BY id`

// Get reads the instance with id and its inbox, in one transaction. It
// returns ErrNotFound when no row has id.
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
		rows, err := tx.Query(ctx, inboxSQL, id)
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
