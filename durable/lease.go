package durable

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"
)

// heartbeatSQL extends the leases of the claims this engine holds and
// returns those it extended, by id and claim count: a row reaped and
// claimed again by this engine is held under a new count, and its old
// claim is lost. It skips the rows another transaction has locked (a
// caller's SignalTx or CancelTx holds one until its transaction ends):
// waiting for one would keep every other lease of the engine from being
// extended meanwhile, and the reaper would take them back while their
// steps still run. A skipped row's lease is not extended: if the lock is
// held past its end, the step's context is cancelled then (see
// claimed.watch), as the reaper may take the row once the lock is
// released; a lock released before, the next beat extends the lease.
// heldSQL then tells a skipped claim from a lost one. Skipping, the
// heartbeat never waits for a lock, so it cannot deadlock with Cancel's
// cascade or a child's commit either; it still locks in ascending id
// order, as they do.
const heartbeatSQL = `
WITH held AS (
    SELECT i.id FROM durable_instance i
    JOIN unnest($3::bigint[], $4::bigint[]) AS h(id, claims) ON i.id = h.id AND i.claims = h.claims
    WHERE i.status = 'executing' AND i.lease_owner = $1
    ORDER BY i.id
    FOR NO KEY UPDATE OF i SKIP LOCKED
)
UPDATE durable_instance i
SET lease_expires_at = now() + $2 * interval '1 microsecond'
FROM held
WHERE i.id = held.id
RETURNING i.id, i.claims`

// heldSQL returns which of the claims ($2, $3: ids and claim counts) the
// engine $1 still holds, without locking: those heartbeatSQL skipped as
// locked by another transaction are still this engine's, only not
// extended this time, and are not lost.
const heldSQL = `
SELECT i.id, i.claims FROM durable_instance i
JOIN unnest($2::bigint[], $3::bigint[]) AS h(id, claims) ON i.id = h.id AND i.claims = h.claims
WHERE i.status = 'executing' AND i.lease_owner = $1`

// heartbeat extends this engine's leases every HeartbeatInterval. A claim
// whose lease is gone (reaped, most likely after a pause longer than the
// lease) is marked lost: a buffered one is not run, a running step's
// context is cancelled. Its outcome would be fenced off anyway. Each beat
// is bounded by the first moment one of the leases may lapse; a running
// step whose lease no beat extends in time has its context cancelled then
// by its own watchdog (see claimed.watch), whether the beats fail, hang or
// skip its row, locked by a caller's transaction.
func (e *engine) heartbeat() {
	e.every(e.c.cfg.HeartbeatInterval, e.beat)
}

// beat is one heartbeat (see heartbeat).
func (e *engine) beat() {
	cfg := &e.c.cfg
	held := e.heldClaims()
	// A step past its FSM's StepTimeout keeps its lease only until it
	// runs out: if the step never returns, the reaper takes the row.
	now := monoNow()
	held = slices.DeleteFunc(held, func(c *claimed) bool { return c.isOverdue(now) })
	if len(held) == 0 {
		return
	}
	ids, claims := fence(held)
	at := time.Now()
	ctx, cancel := context.WithDeadline(context.WithoutCancel(e.bgCtx), e.beatDeadline(held, at))
	defer cancel()
	kept, err := e.claimsIn(ctx, heartbeatSQL, e.owner, cfg.LeaseTTL.Microseconds(), ids, claims)
	if err != nil {
		e.beatFailed(ctx, err)
		return
	}
	for _, c := range held {
		if kept[claimKey{c.id, c.claims}] {
			c.leased(at, cfg.LeaseTTL)
		}
	}
	// The claims not extended: lost, or skipped as locked.
	missed := slices.DeleteFunc(slices.Clone(held), func(c *claimed) bool { return kept[claimKey{c.id, c.claims}] })
	if len(missed) == 0 {
		return
	}
	ids, claims = fence(missed)
	still, err := e.claimsIn(ctx, heldSQL, e.owner, ids, claims)
	if err != nil {
		e.beatFailed(ctx, err)
		return
	}
	for _, c := range missed {
		// A claim still held was skipped as locked by a caller's
		// transaction: not lost, but not extended either. Its step
		// goes on until its lease may lapse, and the next beat after
		// the lock's release extends it.
		if !still[claimKey{c.id, c.claims}] && e.isHeld(c) {
			cfg.Logger.Warn("durable: lease lost", slog.Int64("id", c.id), slog.String("step", c.step))
			c.loseLease()
		}
	}
}

// beatFailed logs the failure of a beat whose context is ctx. A beat that
// ran out of time (see beatDeadline) is a warning: the database is slow or
// unreachable, the leases it did not extend may lapse, and the steps they
// hold are then cancelled (see claimed.watch), which is what the deadline
// is for; the next beat tries again. Any other failure is an error.
func (e *engine) beatFailed(ctx context.Context, err error) {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		e.c.cfg.Logger.Warn("durable: heartbeat did not finish before its deadline, when a lease may lapse; the next beat tries again",
			slog.Any("error", err))
		return
	}
	e.c.cfg.Logger.Error("durable: heartbeat failed", slog.Any("error", err))
}

// beatDeadline is the deadline of a heartbeat sent at at to extend the
// leases of held: the first moment one of them may lapse, when a step's
// context is cancelled (see claimed.watch), so that a heartbeat that hangs
// (the database behind a network partition: a pgx call has no deadline of
// its own) gives up by then and the next one, on a fresh connection, may
// still save the others. Claims already past that moment do not count.
// The deadline is never before the next beat is due (HeartbeatInterval
// after at): giving up sooner would not bring the next beat forward, as
// beats are due at fixed intervals, and a lease that lapses sooner lapses
// whether or not this beat gives up by then, while so tight a deadline
// (milliseconds away for a claim whose row a caller's transaction kept
// locked, which the beats skip) would fail the beat for all the others.
func (e *engine) beatDeadline(held []*claimed, at time.Time) time.Time {
	now, first := mono(at), int64(0)
	for _, c := range held {
		if end := c.leaseEnd.Load(); end > now && (first == 0 || end < first) {
			first = end
		}
	}
	next := at.Add(e.c.cfg.HeartbeatInterval)
	if first == 0 {
		return next
	}
	return latest(monoBase.Add(time.Duration(first)), next)
}

// latest is the later of a and b.
func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// commitContext is the context of the commit of c's outcome. The commit
// may wait for row locks that callers' transactions hold (a child's end
// waits for its parent's, which SignalTx or CancelTx may hold): it waits
// LeaseTTL, and beyond that as long as the heartbeat keeps extending c's
// lease, however long that is, so that a step that has run is not run
// again for want of patience. The context ends once LeaseTTL has passed
// and the lease may have expired (it was not extended for LeaseTTL: the
// claim is lost, or its own row is locked too), since the commit would
// then be fenced off or race the reaper, and, after a hard stop, LeaseTTL
// later at the latest. Its cancel function must be called.
func (e *engine) commitContext(c *claimed) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		expiry := time.NewTimer(max(c.leaseLeft(), e.c.cfg.LeaseTTL))
		defer expiry.Stop()
		var hard <-chan time.Time
		stopping := e.workCtx.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case <-stopping:
				stopping, hard = nil, time.After(e.c.cfg.LeaseTTL)
			case <-hard:
				cancel()
				return
			case <-expiry.C:
				if d := c.leaseLeft(); d > 0 { // extended meanwhile
					expiry.Reset(d)
					continue
				}
				cancel()
				return
			}
		}
	}()
	return ctx, cancel
}

// claimKey is a claim by row id and claim count.
type claimKey struct{ id, claims int64 }

// claimsIn runs query, which returns rows of (id, claims), and returns
// them as a set.
func (e *engine) claimsIn(ctx context.Context, query string, args ...any) (map[claimKey]bool, error) {
	rows, err := e.c.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	set := map[claimKey]bool{}
	var k claimKey
	for rows.Next() {
		if err := rows.Scan(&k.id, &k.claims); err != nil {
			return nil, err
		}
		set[k] = true
	}
	return set, rows.Err()
}

// isHeld reports whether c is still tracked: a claim that finished between
// the snapshot and the heartbeat was not extended, and is not lost.
func (e *engine) isHeld(c *claimed) bool {
	e.heldMu.Lock()
	defer e.heldMu.Unlock()
	_, ok := e.held[c]
	return ok
}

// reapSQL returns up to $1 rows whose lease expired to runnable, with the
// attempt increased: the step that held them counts as an attempt. Their
// eligible time is kept. It counts the reap (reapsNowSQL), and leaves the
// rows whose count would reach $2 (when $2 > 0) to failReapedSQL.
const reapSQL = `
WITH expired AS (
    SELECT id FROM durable_instance
    WHERE status = 'executing' AND lease_expires_at < now()
      AND ($2 <= 0 OR ` + reapsNowSQL + ` < $2)
    ORDER BY lease_expires_at
    LIMIT $1
    FOR UPDATE SKIP LOCKED
)
UPDATE durable_instance i
SET status = 'runnable', attempt = i.attempt + 1,
    error = 'lease of ' || coalesce(i.lease_owner, '?') || ' expired',
    reaps = ` + reapsNowSQL + `, reaped_claim = i.claims,
    lease_owner = NULL, lease_expires_at = NULL, updated_at = now()
FROM expired
WHERE i.id = expired.id
RETURNING i.id, i.queue, coalesce(i.concurrency_key, '')`

// reapBatch is how many rows one reaper statement takes back.
const reapBatch = 1000

// reap takes back expired leases every ReaperInterval.
func (e *engine) reap() {
	e.every(e.c.cfg.ReaperInterval, e.reapOnce)
}

func (e *engine) reapOnce() {
	cfg := &e.c.cfg
	for {
		ctx, cancel := e.dbContext()
		rows, err := e.c.pool.Query(ctx, reapSQL, reapBatch, max(cfg.MaxReaps, 0))
		if err != nil {
			cancel()
			cfg.Logger.Error("durable: reaper failed", slog.Any("error", err))
			return
		}
		var (
			ids        []int64
			id         int64
			queue, key string
			queues     = map[string]bool{}
			keys       []string
		)
		for rows.Next() {
			if err := rows.Scan(&id, &queue, &key); err != nil {
				break
			}
			ids = append(ids, id)
			queues[queue] = true
			if key != "" {
				keys = append(keys, key)
			}
		}
		rows.Close()
		cancel()
		if err := rows.Err(); err != nil {
			cfg.Logger.Error("durable: reaper failed", slog.Any("error", err))
			return
		}
		if len(ids) == 0 {
			break
		}
		cfg.Logger.Warn("durable: reaped expired leases", slog.Int("count", len(ids)))
		if h := cfg.Hooks.ReaperReaped; h != nil {
			h(ReapedEvent{Count: len(ids), IDs: ids})
		}
		e.wakeFreed(queues, keys)
		if len(ids) < reapBatch {
			break
		}
	}
	e.failReaped()
	e.reapCancelled()
}
