package durable

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
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
	// concurrencyKey is the row's concurrency key, "" for none: the
	// commit of its outcome frees the key's slot, and wakes the queues in
	// which rows of the key wait for it (keyWaitersSQL).
	concurrencyKey string
	rateKey        string // the rate-limit bucket whose tokens the claim took; "" for none
	attempt        int
	claims         int64 // the row's claim count when leased: with owner and attempt, the fence
	awaiting       []string
	inbox          []Signal
	// inboxUpTo, when not 0, is the id of the last signal of an inbox the
	// claim did not load (see claimInboxSignals): loadInbox loads it.
	inboxUpTo int64
	// inboxErr is why loadInbox could not load the inbox: the step does
	// not run, and fails with it.
	inboxErr error

	mu     sync.Mutex
	cancel context.CancelCauseFunc // of the running step; nil until it runs
	// watchdog cancels the running step's context once its lease may have
	// lapsed (see watch); nil when the step is not running.
	watchdog *time.Timer
	lost     atomic.Bool // the lease is gone: do not run, or do not trust, the step
	// overdue is the moment (see monoNow) after which the running step is
	// past its FSM's StepTimeout and its lease is no longer extended; 0
	// while it has none, and once the step has returned.
	overdue atomic.Int64
	// leaseEnd is the moment (see monoNow) before which the lease cannot
	// have expired, as far as this engine knows: LeaseTTL after the
	// statement that leased the row, or last extended it, was sent. The
	// running step's context is cancelled then unless a heartbeat extends
	// the lease meanwhile (see watch).
	leaseEnd atomic.Int64
}

// monoBase is the origin of the moments the claims keep: nanoseconds since
// it, on this process's monotonic clock, which a change of the wall clock
// does not move.
var monoBase = time.Now()

// monoNow is the current moment on the monotonic clock.
func monoNow() int64 { return int64(time.Since(monoBase)) }

// mono is t on the monotonic clock; t must carry a monotonic reading
// (time.Now's do, and times derived from them by Add).
func mono(t time.Time) int64 { return int64(t.Sub(monoBase)) }

// leased records that the lease of c was set, or extended, to ttl by a
// statement sent at at, or later.
func (c *claimed) leased(at time.Time, ttl time.Duration) {
	c.leaseEnd.Store(mono(at) + int64(ttl))
}

// leaseLeft is how long the lease of c cannot have expired for, from now:
// 0 or less once it may have.
func (c *claimed) leaseLeft() time.Duration {
	return time.Duration(c.leaseEnd.Load() - monoNow())
}

// setOverdue records that the step of c runs past its timeout once d from
// now has passed; d == 0 clears it.
func (c *claimed) setOverdue(d time.Duration) {
	if d == 0 {
		c.overdue.Store(0)
		return
	}
	c.overdue.Store(monoNow() + int64(d))
}

// isOverdue reports whether the step of c runs past its timeout at now, a
// moment on the monotonic clock (monoNow).
func (c *claimed) isOverdue(now int64) bool {
	d := c.overdue.Load()
	return d != 0 && now >= d
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
		cancel(ErrLeaseLost)
	}
}

// errLeaseLapsed is the cause of the cancellation of a step whose lease
// may have lapsed, no heartbeat having extended it in time.
var errLeaseLapsed = fmt.Errorf("%w: not extended within Config.LeaseTTL (the database may be unreachable, or a caller's transaction held the row's lock)", ErrLeaseLost)

// watch starts the step of c, under the context that cancel cancels: it
// cancels that context, with errLeaseLapsed as the cause, once the lease
// may have lapsed, LeaseTTL after the last heartbeat that extended it (or
// the claim) was sent, unless a heartbeat extends it meanwhile. Only an
// extension counts: a claim the heartbeat found still held but could not
// extend, its row locked by a caller's transaction (see heartbeatSQL),
// lapses all the same, since once that transaction ends the reaper of any
// engine may take the row back and run its step again. It reports false,
// arming nothing, when that moment has already passed: the step must not
// start. unwatch must be called once the step has returned. The clock is
// read once; the timer, when it fires early because a later heartbeat
// moved the moment, is armed again.
func (c *claimed) watch(cancel context.CancelCauseFunc) bool {
	left := c.leaseLeft()
	if left <= 0 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cancel = cancel
	c.watchdog = time.AfterFunc(left, c.lapse)
	return true
}

// lapse is the watchdog's: it cancels the running step once its lease may
// have lapsed.
func (c *claimed) lapse() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.watchdog == nil { // the step has returned
		return
	}
	if left := c.leaseLeft(); left > 0 { // extended meanwhile
		c.watchdog.Reset(left)
		return
	}
	c.cancel(errLeaseLapsed)
}

// unwatch stops the watchdog of a step that has returned.
func (c *claimed) unwatch() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.watchdog != nil {
		c.watchdog.Stop()
		c.watchdog = nil
	}
}

// claimSQL leases up to $2 runnable rows of one queue ($1) to owner $3 for
// $4 microseconds, in priority then eligible-time order, skipping rows
// other transactions hold (another picker's claim, a signal being
// delivered), rows whose concurrency key is at its limit (the limits by
// prefix are $5 and $6; see concurrency.go) and rows whose rate-limit
// bucket lacks the tokens (the limits by name are $7, $8 and $9; see
// ratelimit.go). It locks the first rows that name no bucket and the first
// rows of each bucket that holds tokens for them, as many as the tokens,
// so that it never walks past rows that wait for tokens, and takes the
// first $2 of them. Each keyed row gets a free slot of its key; one that
// finds none (its key filled up within the batch) stays runnable. Each
// bucket of the rows it locked is locked in turn, refilled, and grants its
// rows, in pick order, as long as it holds their cost; it keeps what is
// left. It returns each leased row with its inbox, read in the same
// statement unless too large (see claimInboxSignals) (kind 0), then a line per bucket with due rows (kind 1; see
// rateHeadsSQL), then, if it locked fewer than $2 rows, the line of
// claimNextDueSQL (kind 2).
const claimSQL = `
WITH RECURSIVE conf AS (
    SELECT * FROM unnest($7::text[], $8::float8[], $9::float8[]) AS c(name, rate, burst)
), ` + rateHeadsSQL + `, ` + claimPriosSQL + `, free AS (` + claimFreeRowsSQL + `
), limited AS (
    SELECT i.id, i.concurrency_key, i.rate_limit, i.rate_weight, i.priority, i.eligible_at FROM durable_instance i
    WHERE i.id IN (
            SELECT r.id
            FROM heads k CROSS JOIN LATERAL (
                SELECT i.id FROM durable_instance i
                WHERE i.status = 'runnable' AND i.queue = $1 AND i.rate_limit = k.key AND i.eligible_at <= now()
                  AND (i.concurrency_key IS NULL OR ` + keyHeldSQL + ` < ` + keyLimitSQL + `)
                ORDER BY i.priority, i.eligible_at, i.id
                LIMIT least($2, greatest(floor(k.tokens), 0)::int)) r
            WHERE k.known AND k.tokens >= k.head_cost)
      AND i.status = 'runnable' AND i.queue = $1 AND i.eligible_at <= now()
    FOR UPDATE OF i SKIP LOCKED
), picked AS (
    SELECT p.* FROM (SELECT * FROM free UNION ALL SELECT * FROM limited) p
    ORDER BY p.priority, p.eligible_at, p.id
    LIMIT $2
), ` + claimSlottedSQL + `, ` + rateGrantSQL + `, leased AS (` + claimLeaseSQL + `
      AND (slotted.rate_limit IS NULL OR slotted.id IN (SELECT id FROM granted))
    ` + claimReturningSQL + `
)
SELECT ` + claimColumnsSQL + `
FROM (` + claimLeasedRowsSQL + `
    UNION ALL
    SELECT 1, 0, h.fsm, 0, h.step, NULL, '', '', 0, 0, NULL, (SELECT count(*) FROM picked), NULL,
           h.key, h.known, h.due, coalesce(h.head_cost, 0),
           coalesce((SELECT s.tokens FROM spent s WHERE s.key = h.key), h.tokens, 0), 0, NULL
    FROM heads h
    UNION ALL` + claimNextDueSQL + `
) out
ORDER BY kind, priority, eligible_at, id`

// claimFreeSQL is claimSQL for a queue with no rate-limited rows, which
// makes the picker's every claim while it has none: it leases only rows
// that name no bucket and reports nothing. Being much smaller, it takes a
// fraction of claimSQL's time to plan and to run. It takes $1 to $6 of
// claimSQL. It leaves out claimSQL's line of claimNextDueSQL, which costs
// every claim some time even when a full claim computes nothing: a claim
// that locked fewer than $2 rows is followed by nextDueSQL instead.
const claimFreeSQL = `
WITH picked AS (` + claimFreeRowsSQL + `
), ` + claimSlottedSQL + `, leased AS (` + claimLeaseSQL + `
    ` + claimReturningSQL + `
)
SELECT ` + claimColumnsSQL + `
FROM (` + claimLeasedRowsSQL + `) out
ORDER BY priority, eligible_at, id`

// ratedSQL, sent with claimFreeSQL, reports whether queue $1 has runnable
// rows that name a bucket, which claimFreeSQL leaves to claimSQL, and the
// now() of the claim's transaction, for nextDueSQL.
const ratedSQL = `
SELECT EXISTS (SELECT 1 FROM durable_instance WHERE status = 'runnable' AND queue = $1 AND rate_limit IS NOT NULL), now()`

// nextDueSQL follows a claim of claimFreeSQL that locked fewer rows than
// it asked for, so that the picker need not wait for its next poll to
// start the rows scheduled for later. It returns the microseconds from
// its own now() until the earliest runnable row of queue $1 that was not
// eligible at the claim's now() ($2) becomes so, rounded up; NULL when
// there is none. Not more than 0: such a row became eligible between the
// claim and this statement, and no claim has seen it yet. Rows eligible
// at $2 are left out: the claim passed them over (locked by another
// transaction, their key full), and counting them would send the picker
// back at once for nothing. It takes, for each priority (claimPriosSQL),
// the first row eligible after $2, an index descent each.
const nextDueSQL = `
WITH RECURSIVE ` + claimPriosSQL + `
` + dueAfterSQL + `$2` + dueAfterEndSQL

// The parts claimSQL and claimFreeSQL share.
const (
	// claimFreeRowsSQL locks the first $2 due rows of queue $1 that name
	// no bucket and whose concurrency key has room.
	claimFreeRowsSQL = `
    SELECT i.id, i.concurrency_key, i.rate_limit, i.rate_weight, i.priority, i.eligible_at FROM durable_instance i
    WHERE i.status = 'runnable' AND i.queue = $1 AND i.eligible_at <= now() AND i.rate_limit IS NULL
      AND (i.concurrency_key IS NULL OR ` + keyHeldSQL + ` < ` + keyLimitSQL + `)
    ORDER BY i.priority, i.eligible_at, i.id
    LIMIT $2
    FOR UPDATE OF i SKIP LOCKED`

	// claimSlottedSQL gives each picked row with a concurrency key a free
	// slot of it, or NULL.
	claimSlottedSQL = `slotted AS (
    SELECT p.id, p.rate_limit, p.rate_weight, p.priority, p.eligible_at,
           CASE WHEN p.concurrency_key IS NULL THEN 0 ELSE ` + keyFreeSlotSQL + ` END AS slot
    FROM (SELECT p.*, row_number() OVER (PARTITION BY p.concurrency_key
                                         ORDER BY p.priority, p.eligible_at, p.id) AS rn
          FROM picked p) p
)`

	// claimLeaseSQL leases the slotted rows that got a slot; claimSQL adds
	// a condition, then both claimReturningSQL.
	claimLeaseSQL = `
    UPDATE durable_instance i
    SET status = 'executing', lease_owner = $3,
        lease_expires_at = now() + $4 * interval '1 microsecond',
        claims = i.claims + 1, updated_at = now(), concurrency_slot = slotted.slot
    FROM slotted
    WHERE i.id = slotted.id AND slotted.slot IS NOT NULL`
	claimReturningSQL = `RETURNING i.id, i.fsm, i.fsm_version, i.step, i.state, i.correlation_key, i.concurrency_key, i.attempt, i.claims,
              i.awaiting, i.priority, i.eligible_at, i.rate_limit`

	// claimPriosSQL lists the priorities of the runnable rows of queue
	// $1, lowest first, an index descent each (a loose index scan), for
	// claimNextDueSQL and nextDueSQL; it ends with a NULL.
	claimPriosSQL = `prios(priority) AS (
    SELECT min(i.priority) FROM durable_instance i WHERE i.status = 'runnable' AND i.queue = $1
    UNION ALL
    SELECT (SELECT min(i.priority) FROM durable_instance i
            WHERE i.status = 'runnable' AND i.queue = $1 AND i.priority > p.priority)
    FROM prios p WHERE p.priority IS NOT NULL
)`

	// dueAfterSQL, a moment, and dueAfterEndSQL make the statement, on
	// prios (claimPriosSQL), that returns in us the microseconds from its
	// now() until the earliest runnable row of queue $1 eligible after
	// that moment becomes so, rounded up; NULL when there is none. It
	// takes, for each priority, the first such row in eligible order, an
	// index descent each.
	dueAfterSQL = `SELECT ceil(extract(epoch FROM min(d.eligible_at) - now()) * 1000000)::bigint AS us
FROM prios p CROSS JOIN LATERAL (
    SELECT i.eligible_at FROM durable_instance i
    WHERE i.status = 'runnable' AND i.queue = $1 AND i.priority = p.priority AND i.eligible_at > `
	dueAfterEndSQL = `
    ORDER BY i.eligible_at
    LIMIT 1) d`

	// claimNextDueSQL is the last line of a claim (kind 2) that locked
	// fewer than $2 rows (picked), so that the picker need not wait for
	// its next poll to start the rows scheduled for later: in due, the
	// microseconds from the statement's now() until the earliest runnable
	// row of queue $1 that is not eligible yet becomes so, rounded up; no
	// line when there is none. A claim that locked $2 rows, which the
	// picker follows with another at once, computes nothing: its filter
	// is decided before the rest is evaluated. It takes, for each
	// priority (claimPriosSQL), the first future row in eligible order,
	// an index descent each; the same now() as the claim's rules out a
	// row that became eligible between the two.
	claimNextDueSQL = `
    SELECT 2, 0, '', 0, '', NULL, '', '', 0, 0, NULL, (SELECT count(*) FROM picked), NULL,
           '', true, n.us, 0, 0, 0, NULL
    FROM (` + dueAfterSQL + `now()` + dueAfterEndSQL + `) n
    WHERE (SELECT count(*) FROM picked) < $2 AND n.us IS NOT NULL`

	// claimColumnsSQL and claimLeasedRowsSQL are the result: the leased
	// rows (kind 0), to which each statement adds its lines.
	// claimInboxSignals and claimInboxBytes bound the inbox a claim
	// loads with its row: more signals, or more bytes of stored payloads,
	// and it returns instead the id of the last signal (a JSON number),
	// and the worker loads the inbox apart (loadInboxSQL). A huge inbox
	// (more JSON than PostgreSQL builds in one value, 1 GiB) would fail
	// the claim, and every claim after it, of the whole queue.
	claimInboxSignals = `1000`
	claimInboxBytes   = `16777216`

	// inboxAggSQL is an inbox as the JSON array of the signals s.
	inboxAggSQL = `coalesce(json_agg(json_build_object(
                       'ID', s.id, 'Name', s.name, 'Payload', s.payload,
                       'DedupKey', coalesce(s.dedup_key, ''), 'InsertedAt', s.inserted_at) ORDER BY s.id), '[]')`

	claimColumnsSQL = `kind, id, fsm, fsm_version, step, state, correlation_key, concurrency_key, attempt, claims, awaiting, npicked, inbox,
       rate_limit, known, due, head_cost, tokens`
	claimLeasedRowsSQL = `
    SELECT 0 AS kind, l.id, l.fsm, l.fsm_version, l.step, l.state, coalesce(l.correlation_key, '') AS correlation_key,
           coalesce(l.concurrency_key, '') AS concurrency_key,
           l.attempt, l.claims, l.awaiting, (SELECT count(*) FROM picked) AS npicked,
           coalesce((SELECT to_json(max(s.id)) FROM durable_signal s WHERE s.instance_id = l.id
                     HAVING count(*) > ` + claimInboxSignals + ` OR sum(pg_column_size(s.payload)) > ` + claimInboxBytes + `),
                    (SELECT ` + inboxAggSQL + ` FROM durable_signal s WHERE s.instance_id = l.id)) AS inbox,
           coalesce(l.rate_limit, '') AS rate_limit, true AS known, 0::bigint AS due,
           0::float8 AS head_cost, 0::float8 AS tokens, l.priority, l.eligible_at
    FROM leased l`
)

// claim leases up to n runnable rows of queue to owner, with the default
// concurrency limit of one per key and no rate limit configured (rows that
// name one wait).
func claim(ctx context.Context, db dbtx, queue string, n int, owner string, ttl time.Duration) ([]*claimed, error) {
	r, err := claimRated(ctx, db, queue, n, owner, ttl, newKeyLimits(nil), newRateLimits(nil), true)
	return r.rows, err
}

// claimResult is what a claim did.
type claimResult struct {
	rows []*claimed // leased, in pick order
	// picked is how many rows the claim locked, including those left for
	// lack of a slot or of tokens (0 when it leased none and had no line
	// to report).
	picked int
	// waiting has a line for each bucket with due rows (of claimSQL).
	waiting []rateWaiting
	// rated reports that the queue has runnable rows that name a bucket:
	// with claimSQL, waiting is not empty; with claimFreeSQL (and
	// ratedSQL), the claim leased none of them and claimSQL should.
	rated bool
	// nextDue is how long after the statement's now() the earliest
	// runnable row of the queue that was not eligible then becomes so:
	// known (not 0) only when the claim locked fewer rows than it asked
	// for and there is such a row (claimNextDueSQL, nextDueSQL).
	nextDue time.Duration
	// becameDue reports that a row not eligible at the claim's now()
	// became so before nextDueSQL looked: the picker claims again at
	// once. Each such row sends it back once, since the next claim's
	// now() is later than the row's eligible time.
	becameDue bool
}

// claimRated leases up to n runnable rows of queue to owner, within the
// concurrency limits lim and the rate limits rl: with claimSQL if
// withRates, else with claimFreeSQL, which leaves every row that names a
// bucket.
//
// The statement may have leased rows, and committed, when reading its
// result fails (the connection drops, ctx ends, a row does not decode).
// Nobody would run those rows, or extend their leases, until the leases
// expired and the reaper took them back, counting a reap. So on an error
// claimRated hands back (release) the rows it read, and returns none. A
// row it could not decode stays leased until its lease expires (handed
// back, it would be claimed again at once; reaped too often, it fails with
// ErrReapedTooOften), and so do rows it never read: which ones the
// statement leased is unknown.
func claimRated(ctx context.Context, db dbtx, queue string, n int, owner string, ttl time.Duration,
	lim keyLimits, rl rateLimits, withRates bool) (res claimResult, err error) {
	defer func() {
		if err != nil && len(res.rows) > 0 {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ttl)
			defer cancel()
			if _, rerr := release(rctx, db, owner, res.rows); rerr != nil {
				err = fmt.Errorf("%w; handing back the %d rows it leased failed, their leases will expire: %w", err, len(res.rows), rerr)
			}
		}
		if err != nil {
			res = claimResult{}
		}
	}()
	args := []any{queue, n, owner, ttl.Microseconds(), lim.prefixes, lim.limits}
	if withRates {
		rows, err := db.Query(ctx, claimSQL, append(args, rl.names, rl.rates, rl.bursts)...)
		if err != nil {
			return claimResult{}, err
		}
		return scanClaim(rows, queue)
	}
	b := &pgx.Batch{}
	b.Queue(claimFreeSQL, args...)
	b.Queue(ratedSQL, queue)
	br := db.SendBatch(ctx, b)
	defer br.Close()
	rows, err := br.Query()
	if err != nil {
		return claimResult{}, err
	}
	if res, err = scanClaim(rows, queue); err != nil {
		return res, err
	}
	var claimedAt time.Time
	if err := br.QueryRow().Scan(&res.rated, &claimedAt); err != nil {
		return res, err
	}
	if err := br.Close(); err != nil {
		return res, err
	}
	// A short claim of a queue with rate-limited rows is followed by
	// claimSQL (claimRound), which finds the next due row itself.
	// A failed lookup is not the claim's failure, which would hand its
	// rows back: the picker finds the row at its next poll.
	if res.picked < n && !res.rated {
		res.nextDue, res.becameDue, _ = nextDue(ctx, db, queue, claimedAt)
	}
	return res, nil
}

// nextDue runs nextDueSQL for queue after a claim whose now() was
// claimedAt: how long until the earliest row not eligible at claimedAt
// becomes so (0: there is none), or whether one already has.
func nextDue(ctx context.Context, db dbtx, queue string, claimedAt time.Time) (time.Duration, bool, error) {
	var us *int64
	if err := db.QueryRow(ctx, nextDueSQL, queue, claimedAt).Scan(&us); err != nil {
		return 0, false, err
	}
	switch {
	case us == nil:
		return 0, false, nil
	case *us <= 0:
		return 0, true, nil
	}
	return time.Duration(*us) * time.Microsecond, false, nil
}

// scanClaim reads, and closes, the result of claimSQL or claimFreeSQL. On
// an error it returns the rows it read along with it; a row whose inbox
// does not decode is left out, and the rows after it are read.
func scanClaim(rows pgx.Rows, queue string) (res claimResult, err error) {
	defer rows.Close()
	for rows.Next() {
		var (
			kind             int32
			c                = &claimed{queue: queue}
			version, attempt int32
			npicked          int64
			inbox            []byte
			w                rateWaiting
			due              int64
		)
		if err := rows.Scan(&kind, &c.id, &c.fsm, &version, &c.step, &c.state, &c.correlationKey, &c.concurrencyKey, &attempt,
			&c.claims, &c.awaiting, &npicked, &inbox, &w.key, &w.known, &due, &w.headCost, &w.tokens); err != nil {
			return res, err
		}
		res.picked = int(npicked)
		if kind == 2 {
			res.nextDue = time.Duration(due) * time.Microsecond
			continue
		}
		if kind == 1 {
			w.fsm, w.step, w.due = c.fsm, c.step, int(due)
			res.waiting = append(res.waiting, w)
			res.rated = true
			continue
		}
		c.version, c.attempt, c.rateKey = int(version), int(attempt), w.key
		var into any = &c.inbox
		if len(inbox) > 0 && inbox[0] != '[' { // too large to load here: the id of its last signal
			into = &c.inboxUpTo
		}
		if uerr := json.Unmarshal(inbox, into); uerr != nil {
			if err == nil {
				err = fmt.Errorf("inbox of instance %d: %w", c.id, uerr)
			}
			continue
		}
		res.rows = append(res.rows, c)
	}
	if rerr := rows.Err(); err == nil {
		err = rerr
	}
	return res, err
}

// loadInboxSQL loads the inbox of instance $1, up to signal $2, apart from
// the claim.
const loadInboxSQL = `SELECT ` + inboxAggSQL + ` FROM durable_signal s WHERE s.instance_id = $1 AND s.id <= $2`

// loadInbox loads the inbox of c that its claim did not (c.inboxUpTo),
// before its step runs. If it cannot (more JSON than PostgreSQL builds in
// one value), c.inboxErr says why: the step does not run and fails with
// it, through its FSM's error handling, and the other rows of its queue
// run on.
func (e *engine) loadInbox(c *claimed) {
	if c.inboxUpTo == 0 {
		return
	}
	ctx, cancel := e.dbContext()
	defer cancel()
	var doc []byte
	err := e.c.pool.QueryRow(ctx, loadInboxSQL, c.id, c.inboxUpTo).Scan(&doc)
	if err == nil {
		err = json.Unmarshal(doc, &c.inbox)
	}
	if err != nil {
		c.inboxErr = fmt.Errorf("durable: the inbox of instance %d could not be loaded (too many or too large unconsumed signals?): %w", c.id, err)
	}
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
