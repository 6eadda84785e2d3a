package durable

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemgo/idem/internal/pgstorable"
)

// RateLimit configures the token buckets of one name (Config.RateLimits):
// the bucket "name" and each bucket "name:partition". A bucket gains Limit
// tokens per Period, continuously, and holds at most Burst; a step of an
// instance that names the bucket costs the instance's weight in tokens
// (InsertOpts.RateLimitWeight), taken when the picker leases the row.
type RateLimit struct {
	// Limit is how many tokens a bucket gains per Period: with weight 1,
	// how many steps start per Period. Required: at least 1.
	Limit int

	// Period is the time in which a bucket gains Limit tokens. Defaults to
	// 1s.
	Period time.Duration

	// Burst is how many tokens a bucket holds at most: how many steps may
	// start at once after a quiet spell, and the most one step can cost (a
	// heavier weight costs Burst). A bucket starts full. Defaults to Limit.
	Burst int
}

// RateLimitKey returns the key of the bucket of partition of a rate limit
// name, as InsertOpts.RateLimit takes it: "name:partition". Each partition
// has its own bucket, with the name's configuration.
func RateLimitKey(name, partition string) string { return name + ":" + partition }

// maxRateLimitKey is the longest key InsertOpts.RateLimit takes, in bytes.
const maxRateLimitKey = 255

// checkRateLimitKey reports why key cannot name a bucket, as a phrase that
// follows the field's name.
func checkRateLimitKey(key string) error {
	name, partition, hasPartition := strings.Cut(key, ":")
	switch {
	case len(key) > maxRateLimitKey:
		return fmt.Errorf("must be at most %d bytes, got %d", maxRateLimitKey, len(key))
	case name == "":
		return fmt.Errorf("%q has an empty name: want \"name\" or \"name:partition\"", key)
	case hasPartition && partition == "":
		return fmt.Errorf("%q has an empty partition: want \"name\" or \"name:partition\"", key)
	}
	return nil
}

// rateLimits are Config.RateLimits as the claim statement takes them, in
// name order: tokens per second and burst of each name.
type rateLimits struct {
	names  []string
	rates  []float64 // tokens per second
	bursts []float64
}

// newRateLimits flattens m, whose limits are valid and have their
// defaults.
func newRateLimits(m map[string]RateLimit) rateLimits {
	l := rateLimits{names: []string{}, rates: []float64{}, bursts: []float64{}}
	for name := range m {
		l.names = append(l.names, name)
	}
	slices.Sort(l.names)
	for _, name := range l.names {
		rl := m[name]
		l.rates = append(l.rates, rl.rate())
		l.bursts = append(l.bursts, float64(rl.Burst))
	}
	return l
}

// rate is r's refill in tokens per second.
func (r RateLimit) rate() float64 { return float64(r.Limit) / r.Period.Seconds() }

// validateRateLimits checks Config.RateLimits and fills in the defaults,
// in a copy: the caller's map stays the caller's.
func validateRateLimits(m map[string]RateLimit) (map[string]RateLimit, error) {
	if m == nil {
		return nil, nil
	}
	out := make(map[string]RateLimit, len(m))
	for name, rl := range m {
		field := fmt.Sprintf("Config.RateLimits[%q]", name)
		switch {
		case name == "" || len(name) > maxRateLimitKey:
			return nil, configErrorf(field, "is not a valid name: must be 1–%d bytes", maxRateLimitKey)
		case strings.Contains(name, ":"):
			return nil, configErrorf(field, "is not a valid name: it must not contain ':', which separates a partition")
		case pgstorable.Text(name) != nil: // every claim of a rate-limited row sends it
			return nil, configErrorf(field, "is not a valid name: %v", pgstorable.Text(name))
		case rl.Limit < 1:
			return nil, configErrorf(field+".Limit", "must be at least 1, got %d", rl.Limit)
		case rl.Period < 0:
			return nil, configErrorf(field+".Period", "must not be negative, got %s", rl.Period)
		case rl.Burst < 0:
			return nil, configErrorf(field+".Burst", "must not be negative, got %d", rl.Burst)
		case rl.Burst > math.MaxInt32:
			return nil, configErrorf(field+".Burst", "must be at most %d, got %d", math.MaxInt32, rl.Burst)
		}
		if rl.Period == 0 {
			rl.Period = time.Second
		}
		if rl.Burst == 0 {
			rl.Burst = min(rl.Limit, math.MaxInt32)
		}
		out[name] = rl
	}
	return out, nil
}

// The fragments of claimSQL about rate limits. They need the limits by
// name as the CTE conf (name, rate in tokens per second, burst), and the
// rows that got a concurrency slot as slotted (in rateGrantSQL).
const (
	// bucketTokensSQL is the tokens of bucket b (of a limit c) now: its
	// stored tokens refilled by the time since updated_at, at most the
	// burst; a bucket not yet used (tokens NULL) is full.
	bucketTokensSQL = `CASE WHEN b.tokens IS NULL THEN c.burst
         ELSE least(c.burst, b.tokens + c.rate * greatest(0, extract(epoch FROM now() - b.updated_at))) END`

	// rateHeadsSQL are the CTEs that look at the buckets of the queue's
	// runnable rows. rkeys: the distinct keys, by a loose scan of
	// durable_instance_rate_limit_idx (one probe per key, however many
	// rows wait). heads: each key with due rows, with its first due row's
	// FSM, step and cost (strict order: a key's rows start in pick order,
	// so a heavy row is not overtaken by light ones), its due rows counted
	// up to $2 (up to 1000 for an unknown name), whether a limit has its
	// name, and its bucket's tokens, read without a lock (rateGrantSQL
	// decides); a missing bucket is full.
	rateHeadsSQL = `rkeys AS (
    (SELECT i.rate_limit AS key FROM durable_instance i
     WHERE i.status = 'runnable' AND i.queue = $1 AND i.rate_limit IS NOT NULL
     ORDER BY i.rate_limit LIMIT 1)
    UNION ALL
    SELECT (SELECT i.rate_limit FROM durable_instance i
            WHERE i.status = 'runnable' AND i.queue = $1 AND i.rate_limit > k.key
            ORDER BY i.rate_limit LIMIT 1)
    FROM rkeys k WHERE k.key IS NOT NULL
), heads AS (
    SELECT k.key, c.name IS NOT NULL AS known, h.fsm, h.step, least(h.rate_weight, c.burst)::float8 AS head_cost,
           coalesce((SELECT ` + bucketTokensSQL + ` FROM durable_rate_limit_bucket b WHERE b.key = k.key),
                    c.burst)::float8 AS tokens,
           (SELECT count(*) FROM (SELECT 1 FROM durable_instance d
                                  WHERE d.status = 'runnable' AND d.queue = $1 AND d.rate_limit = k.key
                                    AND d.eligible_at <= now()
                                  LIMIT CASE WHEN c.name IS NULL THEN 1000 ELSE $2 END) d) AS due
    FROM rkeys k
    CROSS JOIN LATERAL (SELECT h.fsm, h.step, h.rate_weight FROM durable_instance h
                        WHERE h.status = 'runnable' AND h.queue = $1 AND h.rate_limit = k.key
                          AND h.eligible_at <= now()
                        ORDER BY h.priority, h.eligible_at, h.id LIMIT 1) h
    LEFT JOIN conf c ON c.name = split_part(k.key, ':', 1)
    WHERE k.key IS NOT NULL
)`

	// rateGrantSQL are the CTEs that spend tokens. keyed: the rows with a
	// slot that name a bucket, each with its cost (its weight, at most the
	// burst) and the running cost of its key's rows up to it in pick
	// order. locked: their buckets, locked in key order, so that pickers
	// of any engine take a bucket's tokens one after the other, each
	// seeing what the last one left. avail: each bucket's tokens now.
	// granted: the rows whose running cost the bucket holds. refilled: the
	// locked buckets, with their tokens taken. created: the buckets missing
	// when the statement began (collected while idle), made with their
	// tokens taken, and without ON CONFLICT: if another picker created one
	// meanwhile, spending from the full bucket it also found missing, this
	// statement fails with a unique violation (bucketKeyIndex) and leases
	// nothing, and the claim is repeated with a fresh snapshot, which
	// locks the bucket; so no two claims spend one burst. spent: both.
	rateGrantSQL = `keyed AS (
    SELECT s.id, s.rate_limit AS key, least(s.rate_weight, c.burst) AS cost, c.rate, c.burst,
           sum(least(s.rate_weight, c.burst)) OVER (PARTITION BY s.rate_limit
                                                   ORDER BY s.priority, s.eligible_at, s.id) AS upto
    FROM slotted s JOIN conf c ON c.name = split_part(s.rate_limit, ':', 1)
    WHERE s.slot IS NOT NULL AND s.rate_limit IS NOT NULL
), locked AS (
    SELECT b.key, b.tokens, b.updated_at FROM durable_rate_limit_bucket b
    WHERE b.key IN (SELECT key FROM keyed)
    ORDER BY b.key
    FOR UPDATE
), avail AS (
    SELECT c.key, c.burst, b.key IS NOT NULL AS existed, ` + bucketTokensSQL + ` AS tokens
    FROM (SELECT DISTINCT key, rate, burst FROM keyed) c LEFT JOIN locked b ON b.key = c.key
), granted AS (
    SELECT k.id, k.key, k.cost FROM keyed k JOIN avail a ON a.key = k.key WHERE k.upto <= a.tokens
), refilled AS (
    UPDATE durable_rate_limit_bucket AS b
    SET tokens = a.tokens - coalesce((SELECT sum(g.cost) FROM granted g WHERE g.key = a.key), 0),
        updated_at = greatest(b.updated_at, now())
    FROM avail a
    WHERE a.existed AND b.key = a.key
    RETURNING b.key, b.tokens
), created AS (
    INSERT INTO durable_rate_limit_bucket (key, tokens, updated_at)
    SELECT a.key, a.tokens - coalesce((SELECT sum(g.cost) FROM granted g WHERE g.key = a.key), 0), now()
    FROM avail a
    WHERE NOT a.existed
    ORDER BY a.key
    RETURNING key, tokens
), spent AS (
    SELECT key, tokens FROM refilled UNION ALL SELECT key, tokens FROM created
)`

	// bucketKeyIndex is the unique index on the buckets' keys, which a
	// claim that created a bucket another claim created too violates.
	bucketKeyIndex = "durable_rate_limit_bucket_pkey"
)

// rateWaiting is a claim's line on one bucket with due rows in the queue:
// whether a limit has its name; the FSM, step and cost of its first due
// row; its due rows, counted up to the claim's demand, and of them those
// the claim left; the tokens its bucket holds after the claim.
type rateWaiting struct {
	key       string
	known     bool
	fsm, step string
	due, left int
	headCost  float64
	tokens    float64
}

// claimRound is one claim of claimRows: up to n rows of q within the
// concurrency limits lim and q's rate limits. While the queue has no row
// that names a bucket it uses claimFreeSQL; when that finds some, it
// claims the rest of n with claimSQL at once, and keeps using it until a
// claim finds none. It keeps the claim's report on the buckets for
// reportRateLimits, and in q.nextDue and q.becameDue what it learnt of the
// earliest row not yet eligible (claimResult.nextDue, becameDue), for the
// picker's timer.
func (q *queue) claimRound(ctx context.Context, n int, lim keyLimits) ([]*claimed, int, error) {
	cfg := &q.e.c.cfg
	res, err := claimRated(ctx, q.e.c.pool, q.name, n, q.e.owner, cfg.LeaseTTL, lim, q.rates, q.rated)
	if err != nil {
		return nil, 0, err
	}
	if !q.rated && res.rated && len(res.rows) < n {
		more, err := claimRated(ctx, q.e.c.pool, q.name, n-len(res.rows), q.e.owner, cfg.LeaseTTL, lim, q.rates, true)
		if err != nil {
			// Keep what the first claim leased; the next claim uses
			// claimSQL.
			var pe *pgconn.PgError
			if !errors.As(err, &pe) || pe.Code != "23505" {
				cfg.Logger.Error("durable: claim failed", slog.String("queue", q.name), slog.Any("error", err))
			}
		} else {
			res.rows = append(res.rows, more.rows...)
			res.picked += more.picked
			res.waiting, res.rated = more.waiting, more.rated
			if more.nextDue > 0 && (res.nextDue == 0 || more.nextDue < res.nextDue) {
				res.nextDue = more.nextDue
			}
		}
	}
	q.rated = res.rated
	q.nextDue, q.becameDue = res.nextDue, res.becameDue
	granted := map[string]int{}
	for _, c := range res.rows {
		if c.rateKey != "" {
			granted[c.rateKey]++
		}
	}
	for i := range res.waiting {
		res.waiting[i].left = max(res.waiting[i].due-granted[res.waiting[i].key], 0)
	}
	q.waiting = res.waiting
	return res.rows, res.picked, nil
}

// reportRateLimits emits the rate-limit events of a pick that leased cs,
// from the report of its last claim, and returns when the first bucket
// that held back a row will hold its cost (0: none did).
func (q *queue) reportRateLimits(cs []*claimed) (wait time.Duration) {
	waiting := q.waiting
	q.waiting = nil
	if len(waiting) == 0 {
		return 0
	}
	cfg := &q.e.c.cfg
	granted := map[string]int{}
	for _, c := range cs {
		if c.rateKey != "" {
			granted[c.rateKey]++
		}
	}
	now := time.Now()
	unknown := cfg.Hooks.RateLimitUnknown != nil && now.Sub(q.unknownAt) >= cfg.PollInterval
	for _, w := range waiting {
		name, _, _ := strings.Cut(w.key, ":")
		if !w.known {
			if unknown {
				cfg.Hooks.RateLimitUnknown(RateLimitUnknownEvent{
					Queue: q.name, Worker: q.e.owner, Key: w.key, Name: name, FSM: w.fsm, Step: w.step, Count: w.due,
				})
				q.unknownAt = now
			}
			continue
		}
		if w.left == 0 || w.tokens >= w.headCost {
			continue // no row left, or they wait for something else: a slot of their concurrency key, or room
		}
		if h := cfg.Hooks.RateLimitThrottled; h != nil {
			g := granted[w.key]
			h(RateLimitThrottledEvent{Queue: q.name, Worker: q.e.owner, Key: w.key, Wanted: g + w.left, Granted: g})
		}
		if d := refillTime(cfg.RateLimits[name], w.headCost-w.tokens); wait == 0 || d < wait {
			wait = d
		}
	}
	return wait
}

// refillTime is how long a bucket of rl takes to gain need tokens, but no
// less than it takes to gain a quarter of its burst, within 1ms…25ms: a
// picker that comes back for every token would claim one row at a time.
func refillTime(rl RateLimit, need float64) time.Duration {
	rate := rl.rate()
	floor := time.Duration(float64(rl.Burst) / 4 / rate * float64(time.Second))
	floor = min(max(floor, time.Millisecond), 25*time.Millisecond)
	d := time.Duration(need / rate * float64(time.Second))
	return max(d, floor)
}
