package durable

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
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
// Wait learns of an end at once when a Client on c's pool, in this
// process, committed it: a step's Done, Stop or Cancel outcome (a failure
// after the last attempt too), the engine's reaper failing an instance
// reaped too often, or Client.Cancel, with the descendants it cancels.
// Other ends, committed by another process, through another pool or by the
// caller's transaction after CancelTx, send no notification (a NOTIFY per
// end would make every end's commit take PostgreSQL's notification queue
// lock). For those Wait polls the instance's status, a read of one row by
// id that does not touch its state or inbox: at once, then after 10 ms,
// doubling up to every second. Such an end is seen up to a second late,
// and each waiting call costs a query a second. Wait needs no engine: a
// Client that is never started (one that only inserts and signals) waits
// as well.
func (c *Client) Wait(ctx context.Context, id int64) (*Instance, error) {
	// Registered before the first poll: a wake-up for an end that a poll
	// missed waits in the channel for the select that follows it.
	key := waitKey{c.pool, id}
	woken := endWaits.add(key)
	defer endWaits.remove(key, woken)
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
		case <-woken:
		}
	}
}

// endWaits holds the Waits in progress in this process, by pool and
// instance id, for the commits that end instances to wake them (ended).
var endWaits waitRegistry

// waitKey names an instance as Wait reads it: by its id, through a pool.
// A pool reaches one table, so no other instance shares the key.
type waitKey struct {
	pool *pgxpool.Pool
	id   int64
}

// waitRegistry is the set of Waits in progress: each waits on a channel
// with room for one wake-up, so that a wake-up sent while it polls is kept
// for its next select.
type waitRegistry struct {
	n  atomic.Int64 // the registered Waits: with none, ended takes no lock
	mu sync.Mutex
	m  map[waitKey]map[chan struct{}]struct{}
}

// add registers a Wait on key and returns the channel it is woken on.
func (r *waitRegistry) add(key waitKey) chan struct{} {
	ch := make(chan struct{}, 1)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[waitKey]map[chan struct{}]struct{}{}
	}
	set := r.m[key]
	if set == nil {
		set = map[chan struct{}]struct{}{}
		r.m[key] = set
	}
	set[ch] = struct{}{}
	r.n.Add(1)
	return ch
}

// remove unregisters the Wait on key that add gave ch.
func (r *waitRegistry) remove(key waitKey, ch chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	set := r.m[key]
	delete(set, ch)
	if len(set) == 0 {
		delete(r.m, key)
	}
	r.n.Add(-1)
}

// count returns the number of Waits registered on pool.
func (r *waitRegistry) count(pool *pgxpool.Pool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for key, set := range r.m {
		if key.pool == pool {
			n += len(set)
		}
	}
	return n
}

// ended wakes the Waits on the instances ids, which a transaction through
// c's pool has ended: call it once that transaction has committed. While
// no Wait is registered it costs an atomic load.
func (c *Client) ended(ids ...int64) {
	r := &endWaits
	if len(ids) == 0 || r.n.Load() == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range ids {
		for ch := range r.m[waitKey{c.pool, id}] {
			select {
			case ch <- struct{}{}:
			default: // a wake-up is pending already
			}
		}
	}
}
