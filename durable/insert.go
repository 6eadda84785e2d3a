package durable

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// InsertOpts are the options of one insert. A nil *InsertOpts is the zero
// value: every field has a default.
type InsertOpts struct {
	// Step is the step the instance starts at. Defaults to the FSM's
	// Initial.
	Step string

	// Queue is the queue the instance runs in. Defaults to the FSM's Queue.
	Queue string

	// Priority orders runnable instances of a queue: lower runs first,
	// then earlier eligible time. -32768 to 32767. Defaults to 0.
	Priority int

	// EligibleAt is the earliest time the first step may run. It wins over
	// ScheduleAt and ScheduleIn. Defaults to the database's now().
	EligibleAt time.Time
	// ScheduleAt is EligibleAt under the name the scheduling sugar uses; it
	// wins over ScheduleIn.
	ScheduleAt time.Time
	// ScheduleIn makes the instance eligible that long after the
	// database's now().
	ScheduleIn time.Duration

	// ConcurrencyKey limits how many instances carrying it execute at once,
	// across all engines: one by default, or Config.ConcurrencyLimits.
	// At most 2048 bytes. Empty: no limit.
	ConcurrencyKey string

	// RateLimit names the token bucket each step of the instance takes
	// tokens from before it starts: "name", or "name:partition" for the
	// bucket of one partition (see RateLimitKey), each bucket refilling as
	// Config.RateLimits[name] of the engines says. The picker leases the
	// instance only when its bucket holds RateLimitWeight tokens, after the
	// earlier rows of the bucket in the queue; until then it stays
	// runnable and the queue's other rows are picked. A name no
	// Config.RateLimits has is not picked and is reported to
	// Hooks.RateLimitUnknown. Empty: no limit.
	RateLimit string

	// RateLimitWeight is how many tokens of RateLimit each step of the
	// instance costs; a weight above the bucket's burst costs the burst.
	// Defaults to 1.
	RateLimitWeight int

	// CorrelationKey is the instance's business identity: Signal can
	// address it by this key instead of its id, and no two instances
	// occupy one key at once (see CorrelationScope). At most 2048 bytes.
	// Defaults to none: the instance is neither addressable by key nor
	// deduplicated.
	CorrelationKey string

	// CorrelationScope is the set of statuses in which the instance
	// occupies CorrelationKey. nil means LiveStatuses(): the key is unique
	// among live instances and freed when the instance ends. Add the
	// terminal statuses the key must stay reserved in after the instance
	// ends in them (until garbage collection deletes the row): to never
	// reuse a key, add all three, StatusDone, StatusFailed and
	// StatusCancelled. A terminal status left out frees the key when the
	// instance ends in it: with live+done+failed, an instance cancelled by
	// Client.Cancel or a step's Cancel outcome frees its key, and a new
	// instance with the same key can be inserted. An empty non-nil
	// slice means no uniqueness: the key is only an address. Any other
	// scope must contain every live status, or the insert fails with a
	// *ScopeError.
	CorrelationScope []Status
}

// InsertResult is the fate of one instance of InsertAll.
type InsertResult struct {
	// ID is the new instance's id; for a duplicate, the id of the
	// instance occupying its key, or 0 when that instance left the key
	// before it could be read.
	ID int64
	// Duplicate reports that the instance was not inserted because its
	// correlation key was occupied, by an existing instance or by an
	// earlier one of the same batch.
	Duplicate bool
}

// InsertParams is one instance for InsertAll.
type InsertParams struct {
	Args Args
	Opts *InsertOpts
}

// wakeupChannel is the NOTIFY channel of wake-up hints: rows of a queue
// are runnable now. The payload is "schema:queue".
const wakeupChannel = "durable_wakeup"

// dueChannel is the NOTIFY channel of due hints: a row of a queue becomes
// eligible later. The payload is "µs:schema:queue", µs (a positive
// integer, never holding a ':') being how long after the hint was sent,
// on the database's clock, the row becomes eligible, rounded up. A channel
// of its own keeps the payload of wakeupChannel what every engine, of
// this version or an earlier one, reads.
const dueChannel = "durable_due"

// row is an instance ready to be inserted.
type row struct {
	fsm      string
	version  int
	step     string
	state    []byte
	queue    string
	priority int16
	eligible *time.Time // nil: now() + in
	in       int64      // microseconds
	concKey  *string
	rateKey  *string
	weight   int32
	key      *string
	scope    []string
}

// eligibleAt is, as this process's clock sees it at now, when an
// instance inserted with opts becomes eligible (see newRow); zero: at
// once.
func eligibleAt(opts *InsertOpts, now time.Time) time.Time {
	switch {
	case opts == nil:
		return time.Time{}
	case !opts.EligibleAt.IsZero():
		return opts.EligibleAt
	case !opts.ScheduleAt.IsZero():
		return opts.ScheduleAt
	case opts.ScheduleIn > 0:
		return now.Add(opts.ScheduleIn)
	}
	return time.Time{}
}

// queueOf is the queue an instance of args goes to.
func queueOf(args Args, opts *InsertOpts) string {
	if opts != nil && opts.Queue != "" {
		return opts.Queue
	}
	if args.def == nil || args.def.isNil() {
		return ""
	}
	return args.def.meta().queue
}

// newRow checks args and opts and encodes the instance, whose state may
// take up to limit bytes of JSON (see Config.MaxPayload).
func newRow(args Args, opts *InsertOpts, limit int) (*row, error) {
	if args.def == nil {
		return nil, errors.New("durable: insert of the zero Args; make them with FSM.With")
	}
	if args.def.isNil() {
		return nil, errors.New("durable: insert of the Args of a nil *FSM (NewFSM's result when it failed?)")
	}
	if opts == nil {
		opts = &InsertOpts{}
	}
	m := args.def.meta()
	r := &row{fsm: m.name, version: m.version, step: cmp.Or(opts.Step, m.initial), queue: cmp.Or(opts.Queue, m.queue)}
	if !m.hasStep(r.step) {
		return nil, fmt.Errorf("%w: InsertOpts.Step %q is not a step of FSM %q", ErrUnknownStep, r.step, m.name)
	}
	if err := checkQueueName(r.queue); err != nil {
		return nil, fmt.Errorf("durable: InsertOpts.Queue %w", err)
	}
	for what, s := range map[string]string{
		"InsertOpts.ConcurrencyKey": opts.ConcurrencyKey, "InsertOpts.RateLimit": opts.RateLimit, "InsertOpts.CorrelationKey": opts.CorrelationKey,
	} {
		if err := checkIndexed(what, s); err != nil {
			return nil, err
		}
	}
	if opts.Priority < math.MinInt16 || opts.Priority > math.MaxInt16 {
		return nil, fmt.Errorf("durable: InsertOpts.Priority must be within −32768…32767, got %d", opts.Priority)
	}
	r.priority = int16(opts.Priority)
	switch {
	case !opts.EligibleAt.IsZero():
		t := opts.EligibleAt
		if err := checkTime("InsertOpts.EligibleAt", t); err != nil {
			return nil, err
		}
		r.eligible = &t
	case !opts.ScheduleAt.IsZero():
		t := opts.ScheduleAt
		if err := checkTime("InsertOpts.ScheduleAt", t); err != nil {
			return nil, err
		}
		r.eligible = &t
	default:
		r.in = opts.ScheduleIn.Microseconds()
	}
	if opts.ConcurrencyKey != "" {
		k := opts.ConcurrencyKey
		r.concKey = &k
	}
	if opts.RateLimit != "" {
		if err := checkRateLimitKey(opts.RateLimit); err != nil {
			return nil, fmt.Errorf("durable: InsertOpts.RateLimit %w", err)
		}
		k := opts.RateLimit
		r.rateKey = &k
	}
	switch {
	case opts.RateLimitWeight < 0 || opts.RateLimitWeight > math.MaxInt32:
		return nil, fmt.Errorf("durable: InsertOpts.RateLimitWeight must be within 1…%d, got %d", math.MaxInt32, opts.RateLimitWeight)
	case opts.RateLimitWeight == 0:
		r.weight = 1
	default:
		r.weight = int32(opts.RateLimitWeight)
	}
	if opts.CorrelationKey != "" {
		k := opts.CorrelationKey
		r.key = &k
	}
	scope, err := normalizeScope(opts.CorrelationScope)
	if err != nil {
		return nil, err
	}
	r.scope = scope
	r.state, err = marshalJSON(args.state)
	if err != nil {
		return nil, fmt.Errorf("durable: encode state of FSM %q: %w", m.name, err)
	}
	if err := checkPayload("state", r.state, limit); err != nil {
		return nil, err
	}
	return r, nil
}

const insertSQL = `
INSERT INTO durable_instance (fsm, fsm_version, step, state, queue, priority, eligible_at,
    concurrency_key, correlation_key, correlation_scope, rate_limit, rate_weight)
VALUES ($1, $2, $3, $4, $5, $6, coalesce($7, now() + $8 * interval '1 microsecond'), $9, $10, $11, $12, $13)
ON CONFLICT (correlation_guard) WHERE correlation_guard IS NOT NULL DO NOTHING
RETURNING id`

// bucketsSQL creates, full, the rate-limit buckets $1 that do not exist
// yet, in the transaction of the insert that names them: a picker that
// sees the row sees its bucket. Key order keeps concurrent inserts of
// several keys from deadlocking; an existing bucket is neither changed nor
// locked.
const bucketsSQL = `
INSERT INTO durable_rate_limit_bucket (key)
SELECT DISTINCT k FROM unnest($1::text[]) AS k WHERE k IS NOT NULL ORDER BY k
ON CONFLICT (key) DO NOTHING`

// occupantSQL finds the instance occupying a key. Run after a conflicting
// insert, as a statement of its own, it sees the row the insert waited for.
const occupantSQL = `SELECT id FROM durable_instance WHERE correlation_guard = $1`

const notifySQL = `SELECT pg_notify('` + wakeupChannel + `', current_schema() || ':' || $1)`

// notifyEligibleSQL sends, for each queue of $1, a hint for the earliest
// of its rows, each of which becomes eligible at $2 (NULL: now() plus $3
// microseconds), as insertSQL, insertAllSQL and reviveSQL compute it: a
// wake-up hint if that moment has passed by the time the hint is sent
// (clock_timestamp()), else a due hint saying how long until it comes, so
// that the engines serving the queue arm their pickers' timers for it.
// One hint per queue is enough: the claim it leads to, coming back short,
// learns when the next row not yet eligible becomes so.
const notifyEligibleSQL = `
SELECT pg_notify(CASE WHEN us > 0 THEN '` + dueChannel + `' ELSE '` + wakeupChannel + `' END,
                 CASE WHEN us > 0 THEN us || ':' ELSE '' END || current_schema() || ':' || q)
FROM (SELECT q, ceil(extract(epoch FROM min(coalesce(at, now() + in_us * interval '1 microsecond')) - clock_timestamp()) * 1000000)::bigint AS us
      FROM unnest($1::text[], $2::timestamptz[], $3::bigint[]) AS t(q, at, in_us)
      GROUP BY q) due`

// Insert inserts one instance and returns its id. When the correlation key
// is occupied it inserts nothing and returns a *DuplicateError carrying the
// occupant's id (errors.Is(err, ErrDuplicate)). A state whose JSON is larger
// than Config.MaxPayload is rejected with a *PayloadTooLargeError before
// anything is written.
func (c *Client) Insert(ctx context.Context, args Args, opts *InsertOpts) (int64, error) {
	id, err := insertOne(ctx, c.pool, args, opts, c.cfg.MaxPayload)
	if err == nil {
		c.madeLocal(queueOf(args, opts), eligibleAt(opts, time.Now()))
	}
	return id, err
}

// InsertTx is Insert in the caller's transaction, which it never commits or
// rolls back: the instance exists, and may run, only once tx commits. The
// transaction should be READ COMMITTED, so that a duplicate can report
// the occupant's id: under REPEATABLE READ or SERIALIZABLE, a key taken by
// an instance committed after tx's snapshot is PostgreSQL's serialization
// failure (SQLSTATE 40001, tx aborted; retry the whole transaction), not a
// *DuplicateError.
func (c *Client) InsertTx(ctx context.Context, tx pgx.Tx, args Args, opts *InsertOpts) (int64, error) {
	return insertOne(ctx, tx, args, opts, c.cfg.MaxPayload)
}

func insertOne(ctx context.Context, db dbtx, args Args, opts *InsertOpts, limit int) (int64, error) {
	r, err := newRow(args, opts, limit)
	if err != nil {
		return 0, err
	}
	// An occupant may leave its key between our conflict and the look-up:
	// then the insert is worth another try.
	for try := 0; ; try++ {
		id, occupant, err := tryInsert(ctx, db, r)
		switch {
		case err != nil:
			return 0, fmt.Errorf("durable: insert: %w", err)
		case id != 0:
			return id, nil
		case r.key == nil:
			return 0, errors.New("durable: insert: no id returned")
		case occupant != 0 || try == 2:
			return 0, &DuplicateError{CorrelationKey: *r.key, ID: occupant}
		}
	}
}

// tryInsert inserts r in one round trip: the insert, the occupant look-up
// and the wake-up or due hint. It returns the new id, or 0 and the occupant's id.
func tryInsert(ctx context.Context, db dbtx, r *row) (id, occupant int64, err error) {
	b := &pgx.Batch{}
	if r.rateKey != nil {
		b.Queue(bucketsSQL, []string{*r.rateKey})
	}
	b.Queue(insertSQL, r.fsm, r.version, r.step, r.state, r.queue, r.priority, r.eligible, r.in,
		r.concKey, r.key, r.scope, r.rateKey, r.weight)
	if r.key != nil {
		b.Queue(occupantSQL, *r.key)
	}
	if r.eligible == nil && r.in <= 0 {
		b.Queue(notifySQL, r.queue) // eligible at once: the plain wake-up hint
	} else {
		b.Queue(notifyEligibleSQL, []string{r.queue}, []*time.Time{r.eligible}, []int64{r.in})
	}
	br := db.SendBatch(ctx, b)
	defer br.Close()
	if r.rateKey != nil {
		if _, err := br.Exec(); err != nil {
			return 0, 0, err
		}
	}
	if err := br.QueryRow().Scan(&id); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return 0, 0, err
	}
	if r.key != nil {
		if err := br.QueryRow().Scan(&occupant); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return 0, 0, err
		}
	}
	if _, err := br.Exec(); err != nil { // the hint
		return 0, 0, err
	}
	if err := br.Close(); err != nil {
		return 0, 0, err
	}
	return id, occupant, nil
}

// insertAllSQL inserts a batch in one statement. Ids are drawn first, so
// that each input row knows its id; rows go in ordered by correlation key,
// so that concurrent batches wait for one another's keys in one order and
// never deadlock. ON CONFLICT DO NOTHING drops duplicates, of existing rows
// and within the batch (the first in key, then input order, wins).
const insertAllSQL = `
WITH input AS (
    SELECT nextval(pg_get_serial_sequence('durable_instance', 'id')) AS id, t.*
    FROM unnest($1::text[], $2::int[], $3::text[], $4::jsonb[], $5::text[], $6::smallint[],
                $7::timestamptz[], $8::bigint[], $9::text[], $10::text[], $11::text[], $12::text[], $13::int[])
         WITH ORDINALITY AS t(fsm, fsm_version, step, state, queue, priority, eligible_at, in_us,
                              concurrency_key, correlation_key, correlation_scope, rate_limit, rate_weight, ord)
), inserted AS (
    INSERT INTO durable_instance (id, fsm, fsm_version, step, state, queue, priority, eligible_at,
        concurrency_key, correlation_key, correlation_scope, rate_limit, rate_weight)
    SELECT id, fsm, fsm_version, step, state, queue, priority,
           coalesce(eligible_at, now() + in_us * interval '1 microsecond'),
           concurrency_key, correlation_key, string_to_array(correlation_scope, ','), rate_limit, rate_weight
    FROM input
    ORDER BY correlation_key COLLATE "C" NULLS LAST, ord
    ON CONFLICT (correlation_guard) WHERE correlation_guard IS NOT NULL DO NOTHING
    RETURNING id
)
SELECT input.ord, inserted.id
FROM input JOIN inserted USING (id)`

const occupantsSQL = `
SELECT correlation_guard, id FROM durable_instance WHERE correlation_guard = ANY($1::text[])`

// InsertAll inserts instances in one statement and returns their fates in
// the order given. Instances whose correlation key is occupied, by an
// existing instance or by an earlier one of the batch, are dropped and
// reported as duplicates. Concurrent InsertAll calls whose keys overlap
// never deadlock, whatever the order of their inputs: rows are inserted in
// key order. An instance that is invalid, or whose state is larger than
// Config.MaxPayload, fails the whole call before anything is written.
func (c *Client) InsertAll(ctx context.Context, params []InsertParams) ([]InsertResult, error) {
	res, err := insertAll(ctx, c.pool, params, c.cfg.MaxPayload)
	if err == nil {
		now := time.Now()
		for _, p := range params {
			c.madeLocal(queueOf(p.Args, p.Opts), eligibleAt(p.Opts, now))
		}
	}
	return res, err
}

// InsertAllTx is InsertAll in the caller's transaction, which it never
// commits or rolls back.
func (c *Client) InsertAllTx(ctx context.Context, tx pgx.Tx, params []InsertParams) ([]InsertResult, error) {
	return insertAll(ctx, tx, params, c.cfg.MaxPayload)
}

func insertAll(ctx context.Context, db dbtx, params []InsertParams, limit int) ([]InsertResult, error) {
	if len(params) == 0 {
		return nil, nil
	}
	n := len(params)
	var (
		fsms, steps, queues, scopes = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		versions                    = make([]int32, n)
		states                      = make([][]byte, n)
		prios                       = make([]int16, n)
		eligible                    = make([]*time.Time, n)
		ins                         = make([]int64, n)
		concKeys, keys              = make([]*string, n), make([]*string, n)
		rateKeys                    = make([]*string, n)
		weights                     = make([]int32, n)
		anyRate                     bool
	)
	for i, p := range params {
		r, err := newRow(p.Args, p.Opts, limit)
		if err != nil {
			return nil, fmt.Errorf("durable: InsertAll[%d]: %w", i, err)
		}
		fsms[i], versions[i], steps[i], states[i], queues[i] = r.fsm, int32(r.version), r.step, r.state, r.queue
		prios[i], eligible[i], ins[i], concKeys[i], keys[i] = r.priority, r.eligible, r.in, r.concKey, r.key
		scopes[i] = strings.Join(r.scope, ",")
		rateKeys[i], weights[i] = r.rateKey, r.weight
		anyRate = anyRate || r.rateKey != nil
	}
	var distinct []string
	for _, k := range keys {
		if k != nil && !slices.Contains(distinct, *k) {
			distinct = append(distinct, *k)
		}
	}

	b := &pgx.Batch{}
	if anyRate {
		b.Queue(bucketsSQL, rateKeys)
	}
	b.Queue(insertAllSQL, fsms, versions, steps, states, queues, prios, eligible, ins, concKeys, keys, scopes,
		rateKeys, weights)
	if len(distinct) > 0 {
		b.Queue(occupantsSQL, distinct)
	}
	b.Queue(notifyEligibleSQL, queues, eligible, ins)
	br := db.SendBatch(ctx, b)
	defer br.Close()

	if anyRate {
		if _, err := br.Exec(); err != nil {
			return nil, fmt.Errorf("durable: InsertAll: %w", err)
		}
	}
	out := make([]InsertResult, n)
	for i := range out {
		out[i].Duplicate = true
	}
	rows, err := br.Query()
	if err != nil {
		return nil, fmt.Errorf("durable: InsertAll: %w", err)
	}
	var ord, id int64
	if _, err := pgx.ForEachRow(rows, []any{&ord, &id}, func() error {
		out[ord-1] = InsertResult{ID: id}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("durable: InsertAll: %w", err)
	}
	if len(distinct) > 0 {
		occupants := make(map[string]int64, len(distinct))
		var key string
		rows, err := br.Query()
		if err != nil {
			return nil, fmt.Errorf("durable: InsertAll: %w", err)
		}
		if _, err := pgx.ForEachRow(rows, []any{&key, &id}, func() error {
			occupants[key] = id
			return nil
		}); err != nil {
			return nil, fmt.Errorf("durable: InsertAll: %w", err)
		}
		for i := range out {
			if out[i].Duplicate && keys[i] != nil {
				out[i].ID = occupants[*keys[i]]
			}
		}
	}
	if _, err := br.Exec(); err != nil { // notifyEligibleSQL
		return nil, fmt.Errorf("durable: InsertAll: %w", err)
	}
	if err := br.Close(); err != nil {
		return nil, fmt.Errorf("durable: InsertAll: %w", err)
	}
	return out, nil
}
