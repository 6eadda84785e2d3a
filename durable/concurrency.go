package durable

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// concurrencyIndex is the unique index over the (concurrency_key,
// concurrency_slot) of the rows that hold a slot (holdsSlotSQL): a key's
// slot is held by one row.
const concurrencyIndex = "durable_instance_concurrency_idx"

// holdsSlotSQL is true for a row of alias e that holds its key's slot: an
// executing row, or a row cancelled while executing whose lease has not
// been cleared yet, since its step may still run (see cancelSQL). It is
// the predicate of concurrencyIndex, spelled the same so that the planner
// uses the index.
const holdsSlotSQL = `(e.status = 'executing' OR (e.status = 'cancelled' AND e.lease_owner IS NOT NULL))`

// The fragments of claimSQL and contendedSQL about concurrency keys. They
// need the key's row as i (in picked) or p (in slotted), and the limits by
// prefix as $5 (text[]) and $6 (integer[]).
const (
	// keyLimitSQL is the limit of i's key: that of the longest prefix of
	// the key in the limits, or 1.
	keyLimitSQL = `coalesce((SELECT u.l FROM unnest($5::text[], $6::integer[]) AS u(p, l)
                   WHERE starts_with(i.concurrency_key, u.p) ORDER BY length(u.p) DESC LIMIT 1), 1)`
	// keyHeldSQL counts the rows of i's key that hold a slot.
	keyHeldSQL = `(SELECT count(*) FROM durable_instance e
                   WHERE e.concurrency_key = i.concurrency_key AND ` + holdsSlotSQL + `)`
	// keyFreeSlotSQL is the p.rn-th free slot of p's key below its limit,
	// or NULL when there are fewer free slots.
	keyFreeSlotSQL = `(SELECT s FROM generate_series(0, coalesce((SELECT u.l FROM unnest($5::text[], $6::integer[]) AS u(p, l)
                       WHERE starts_with(p.concurrency_key, u.p) ORDER BY length(u.p) DESC LIMIT 1), 1) - 1) AS s
               WHERE NOT EXISTS (SELECT 1 FROM durable_instance e
                                 WHERE e.concurrency_key = p.concurrency_key AND ` + holdsSlotSQL + `
                                   AND e.concurrency_slot = s)
               ORDER BY s OFFSET p.rn - 1 LIMIT 1)`
)

// contendedSQL counts, by key, the rows among the first $2 due rows of
// queue $1 (in pick order) that wait because their key is at its limit.
// The limits are $3 and $4.
var contendedSQL = strings.NewReplacer("$5", "$3", "$6", "$4").Replace(`
SELECT i.concurrency_key, count(*), min(` + keyLimitSQL + `)
FROM (SELECT concurrency_key FROM durable_instance
      WHERE status = 'runnable' AND queue = $1 AND eligible_at <= now()
      ORDER BY priority, eligible_at, id
      LIMIT $2) i
WHERE i.concurrency_key IS NOT NULL AND ` + keyHeldSQL + ` >= ` + keyLimitSQL + `
GROUP BY i.concurrency_key
ORDER BY i.concurrency_key`)

// keyLimits are Config.ConcurrencyLimits as the statements take them.
type keyLimits struct {
	prefixes []string
	limits   []int32
}

// newKeyLimits flattens m, in prefix order.
func newKeyLimits(m map[string]int) keyLimits {
	var l keyLimits
	for p := range m {
		l.prefixes = append(l.prefixes, p)
	}
	slices.Sort(l.prefixes)
	for _, p := range l.prefixes {
		l.limits = append(l.limits, int32(m[p]))
	}
	if l.prefixes == nil { // a NULL array would match nothing either; send an empty one
		l.prefixes, l.limits = []string{}, []int32{}
	}
	return l
}

// maxClaimRounds bounds the claims one pick makes: a claim that locked as
// many rows as asked but leased fewer, because a key filled up within its
// batch, is repeated, so that the rows it left do not hold back the others.
const maxClaimRounds = 4

// maxRaceRetries bounds the repeats of a claim that lost a race for a
// key's slot (a unique violation of concurrencyIndex): the repeat sees the
// winner's row executing and skips the key's rows.
const maxRaceRetries = 3

// claimRows is the picker's claim: up to room rows of q within the
// concurrency limits. Rows of a key at its limit are skipped, never waited
// for; the contention is reported to Hooks.ConcurrencyContended.
func (q *queue) claimRows(ctx context.Context, room int) ([]*claimed, error) {
	cfg := &q.e.c.cfg
	lim := newKeyLimits(cfg.ConcurrencyLimits)
	var (
		out   []*claimed
		races int
	)
	for round := 0; round < maxClaimRounds && len(out) < room; {
		ask := room - len(out)
		at := time.Now()
		cs, picked, err := q.claimRound(ctx, ask, lim)
		for _, c := range cs {
			c.leased(at, cfg.LeaseTTL)
		}
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "23505" && (pe.ConstraintName == concurrencyIndex || pe.ConstraintName == bucketKeyIndex) {
			// The statement leased nothing: repeat it with a fresh
			// snapshot, or leave the rest to the next pick.
			if races++; races <= maxRaceRetries {
				continue
			}
			break
		}
		if err != nil {
			if len(out) > 0 { // keep what earlier rounds leased
				cfg.Logger.Error("durable: claim failed", slog.String("queue", q.name), slog.Any("error", err))
				break
			}
			return nil, err
		}
		out = append(out, cs...)
		if len(cs) == 0 || picked < ask { // nothing more is due, or only rows of full keys
			break
		}
		round++
	}
	if h := cfg.Hooks.ConcurrencyContended; h != nil && len(out) < room {
		q.reportContention(ctx, h, room, lim, races)
	}
	return out, nil
}

// reportContention emits a ConcurrencyContendedEvent for each key whose
// rows wait among the first room due rows of q.
func (q *queue) reportContention(ctx context.Context, h func(ConcurrencyContendedEvent), room int, lim keyLimits, races int) {
	rows, err := q.e.c.pool.Query(ctx, contendedSQL, q.name, room, lim.prefixes, lim.limits)
	if err != nil {
		q.e.c.cfg.Logger.Warn("durable: counting contended concurrency keys failed", slog.String("queue", q.name), slog.Any("error", err))
		return
	}
	var evs []ConcurrencyContendedEvent
	for rows.Next() {
		var (
			ev    = ConcurrencyContendedEvent{Queue: q.name, Worker: q.e.owner, Races: races}
			n     int64
			limit int32
		)
		if err := rows.Scan(&ev.Key, &n, &limit); err != nil {
			rows.Close()
			return
		}
		ev.Count, ev.Limit = int(n), int(limit)
		evs = append(evs, ev)
	}
	if rows.Err() != nil {
		return
	}
	for _, ev := range evs {
		h(ev)
	}
}

// keyWaitersSQL, after the statement that committed the outcome of
// instance $2 in the same transaction, returns the queues in which other
// rows of its concurrency key $1 are due, each with a wake-up hint, if the
// outcome freed the instance's slot: rows of a key at its limit are
// skipped by every picker, and the engines serving their queues, which
// may not be this one, would otherwise learn of the free slot only at
// their next poll. It sends no hint when no row of the key waits, nor
// when the instance still holds a slot (the commit was fenced off).
const keyWaitersSQL = `
SELECT q, pg_notify('` + wakeupChannel + `', current_schema() || ':' || q)
FROM (SELECT DISTINCT w.queue AS q FROM durable_instance w
      WHERE w.concurrency_key = $1 AND w.status = 'runnable' AND w.eligible_at <= now() AND w.id <> $2
        AND NOT EXISTS (SELECT 1 FROM durable_instance e WHERE e.id = $2 AND ` + holdsSlotSQL + `)) waiting`

// keyWaitersOfSQL returns the queues in which due rows of the concurrency
// keys $1 wait: keyWaitersSQL for the slots freed outside a commit.
const keyWaitersOfSQL = `
SELECT DISTINCT queue FROM durable_instance
WHERE concurrency_key = ANY($1::text[]) AND status = 'runnable' AND eligible_at <= now()`

// wakeFreed is wake for queues, of rows that freed slots of the keys
// (duplicates allowed; it sorts them, and adds to queues): it wakes too
// the engines serving the queues in which rows of those keys wait, which
// would otherwise learn of the free slots only at their next poll. A failure to look them up is only
// logged: polling covers the gap.
func (e *engine) wakeFreed(queues map[string]bool, keys []string) {
	if len(keys) > 0 {
		slices.Sort(keys)
		keys = slices.Compact(keys)
		ctx, cancel := e.dbContext()
		rows, err := e.c.pool.Query(ctx, keyWaitersOfSQL, keys)
		var waiting []string
		if err == nil {
			waiting, err = pgx.CollectRows(rows, pgx.RowTo[string])
		}
		cancel()
		if err != nil {
			e.c.cfg.Logger.Warn("durable: looking up the rows waiting for freed concurrency slots failed; their engines will poll",
				slog.Any("error", err))
		}
		if len(waiting) > 0 && queues == nil {
			queues = map[string]bool{}
		}
		for _, q := range waiting {
			queues[q] = true
		}
	}
	e.wake(queues)
}

// keysOf returns the concurrency keys of cs.
func keysOf(cs []*claimed) []string {
	var keys []string
	for _, c := range cs {
		if c.concurrencyKey != "" {
			keys = append(keys, c.concurrencyKey)
		}
	}
	return keys
}

// execFreeingSlot runs sql, the statement that commits the outcome of c
// and frees its slot, with args, and returns how many rows it changed:
// with keyWaitersSQL in the same transaction when c has a concurrency key
// (see keyWaitersSQL), alone otherwise. When counted, sql returns that
// count as its one row; otherwise it is the count of rows its tag gives.
func execFreeingSlot(ctx context.Context, db dbtx, c *claimed, sql string, counted bool, args ...any) (n int64, waiters []string, err error) {
	if c.concurrencyKey == "" {
		if counted {
			err = db.QueryRow(ctx, sql, args...).Scan(&n)
			return n, nil, err
		}
		tag, err := db.Exec(ctx, sql, args...)
		return tag.RowsAffected(), nil, err
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	b.Queue(keyWaitersSQL, c.concurrencyKey, c.id)
	br := db.SendBatch(ctx, b)
	defer br.Close()
	if counted {
		err = br.QueryRow().Scan(&n)
	} else {
		var tag pgconn.CommandTag
		tag, err = br.Exec()
		n = tag.RowsAffected()
	}
	if err != nil {
		return 0, nil, err
	}
	if waiters, err = hintedQueues(br.Query()); err != nil { // keyWaitersSQL
		return 0, nil, err
	}
	return n, waiters, br.Close()
}
