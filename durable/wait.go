package durable

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// The interval between Wait's polls: the first poll is at once, the next
// after waitPollMin, doubling to waitPollMax.
const (
	waitPollMin = 10 * time.Millisecond
	waitPollMax = time.Second
)

// waitStatusSQL is Wait's poll: the status alone, one row by primary key,
// whatever the size of the instance's state or inbox.
const waitStatusSQL = `SELECT status FROM durable_instance WHERE id = $1`

// Wait waits until the instance with id has ended (done, failed or
// cancelled: Status.Terminal) and returns it as Get reads it. It returns
// at once for an instance that has already ended.
//
// It returns ErrNotFound when no row has id: never inserted, or collected
// by garbage collection (Config.GCRetention after its end) before Wait saw
// it end. When ctx ends first it returns ctx.Err() itself; other errors
// are the database's. An instance that Client.Retry revives after Wait
// returned it is not waited for again; one revived between Wait's poll and
// its read is.
//
// Instances' ends send no notification, so Wait polls the instance's
// status, a read of one row by id that does not touch its state or inbox:
// at once, then after 10 ms, doubling up to every second. An end is seen
// up to a second late, and each waiting call costs a query a second. Wait
// needs no engine: a Client that is never started (one that only inserts
// and signals) waits as well.
func (c *Client) Wait(ctx context.Context, id int64) (*Instance, error) {
	var timer *time.Timer
	for delay := waitPollMin; ; delay = min(2*delay, waitPollMax) {
		var status Status
		err := c.pool.QueryRow(ctx, waitStatusSQL, id).Scan(&status)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, ctx.Err()
		case errors.Is(err, pgx.ErrNoRows):
			return nil, fmt.Errorf("%w: %d", ErrNotFound, id)
		case err != nil:
			return nil, fmt.Errorf("durable: Wait: %w", err)
		case status.Terminal():
			in, err := c.Get(ctx, id)
			if err != nil && ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if err != nil || in.Status.Terminal() {
				return in, err
			}
			// Retried between the poll and Get: wait on.
		}
		if timer == nil {
			timer = time.NewTimer(delay)
			defer timer.Stop()
		} else {
			timer.Reset(delay)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timer.C:
		}
	}
}
