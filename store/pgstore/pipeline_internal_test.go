package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/internal/leftcalls"
	"github.com/idemgo/idem/internal/pgtest"
)

// pipelineOnOneLane is a pipeline of one lane on a fresh schema, and a
// call that keeps that lane busy for d: the calls made meanwhile queue up
// and go out together in the next batch.
func pipelineOnOneLane(t *testing.T) (*pipeline, *pgxpool.Pool, func(d time.Duration) <-chan error) {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	p := newPipeline(pool, 1, 16, new(leftcalls.Counter))
	return p, pool, func(d time.Duration) <-chan error { return keepBusy(t, p, d) }
}

// keepBusy keeps the only lane of p busy for d, and returns once the lane
// has taken the call: the calls made meanwhile queue up and go out
// together in the next batch. The call's error comes on the channel.
func keepBusy(t *testing.T, p *pipeline, d time.Duration) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := p.exec(context.Background(), "SELECT pg_sleep($1::float8)", d.Seconds())
		done <- err
	}()
	// Until the lane has taken the sleep.
	waitFor(t, p, func() bool { return p.running == 1 && len(p.queue) == 0 })
	return done
}

// inOneBatch keeps the lane busy while n goroutines each make call(i),
// so that the n calls queue and go out as one batch, and returns when
// they and the busy call are done.
func inOneBatch(t *testing.T, busy func(time.Duration) <-chan error, n int, call func(i int)) {
	t.Helper()
	done := busy(200 * time.Millisecond)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { call(i) })
	}
	wg.Wait()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestPipelineErrorStaysInItsStatement sends three statements in one
// batch, the second failing: the other two still succeed, each in its own
// transaction.
func TestPipelineErrorStaysInItsStatement(t *testing.T) {
	p, _, busy := pipelineOnOneLane(t)
	divisors := []int{1, 0, 2}
	got := make([]int64, len(divisors))
	errs := make([]error, len(divisors))
	inOneBatch(t, busy, len(divisors), func(i int) {
		errs[i] = p.queryRow(context.Background(), "SELECT 10 / $1::int8", []any{divisors[i]}, &got[i])
	})
	var pe *pgconn.PgError
	if errs[0] != nil || got[0] != 10 || errs[2] != nil || got[2] != 5 {
		t.Errorf("10/1 = %d, %v; 10/2 = %d, %v; want 10 and 5", got[0], errs[0], got[2], errs[2])
	}
	if !errors.As(errs[1], &pe) || pe.Code != "22012" {
		t.Errorf("10/0: %v, want division_by_zero (22012)", errs[1])
	}
	// The runner ends once the queue is empty.
	waitFor(t, p, func() bool { return p.running == 0 })
}

// waitFor waits until cond, called with p.mu held, holds, or fails t
// after five seconds.
func waitFor(t *testing.T, p *pipeline, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		p.mu.Lock()
		ok := cond()
		p.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the pipeline did not get there in 5s")
		}
	}
}

// TestPipelineAbandonedCallIsNotSent: a call whose context ends while it
// waits in the queue returns at once, and its statement never runs.
func TestPipelineAbandonedCallIsNotSent(t *testing.T) {
	p, pool, busy := pipelineOnOneLane(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, "CREATE TABLE probe (k int)"); err != nil {
		t.Fatal(err)
	}
	// The lane stays busy long after the call's context ends, far enough
	// that a loaded machine slow to run the call's return does not pass
	// for one that waited for the lane.
	done := busy(1500 * time.Millisecond)
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := p.exec(cctx, "INSERT INTO probe VALUES (1)")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("exec = %v, want the context's deadline", err)
	}
	if waited := time.Since(start); waited > time.Second {
		t.Errorf("the abandoned call returned after %v, not when its context ended", waited)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var n int64
	if err := p.queryRow(ctx, "SELECT count(*) FROM probe", nil, &n); err != nil || n != 0 {
		t.Errorf("probe has %d rows (%v): the abandoned INSERT ran", n, err)
	}
}

// TestPipelineEndedContext: a call with a context already ended is
// refused without queueing.
func TestPipelineEndedContext(t *testing.T) {
	p, _, _ := pipelineOnOneLane(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.exec(ctx, "SELECT 1"); !errors.Is(err, context.Canceled) {
		t.Fatalf("exec = %v, want context.Canceled", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.queue) != 0 || p.running != 0 {
		t.Errorf("queue %d, runners %d: the call was queued", len(p.queue), p.running)
	}
}

// TestPipelineBadStatementFailsAlone: a statement the server cannot
// prepare fails on its own; the others of its batch run.
func TestPipelineBadStatementFailsAlone(t *testing.T) {
	p, _, busy := pipelineOnOneLane(t)
	queries := []string{"SELECT 1::int8", "SELEC 2", "SELECT 3::int8"}
	got := make([]int64, len(queries))
	errs := make([]error, len(queries))
	inOneBatch(t, busy, len(queries), func(i int) {
		errs[i] = p.queryRow(context.Background(), queries[i], nil, &got[i])
	})
	var pe *pgconn.PgError
	if errs[0] != nil || got[0] != 1 || errs[2] != nil || got[2] != 3 {
		t.Errorf("good statements: %d %v, %d %v; want 1 and 3", got[0], errs[0], got[2], errs[2])
	}
	if !errors.As(errs[1], &pe) || pe.Code != "42601" {
		t.Errorf("bad statement: %v, want syntax_error (42601)", errs[1])
	}
}

// batchRecorder is a pgx tracer that records the batches it is told of.
type batchRecorder struct {
	mu      sync.Mutex
	started [][]string // the SQL of each batch
	queries []string
	ended   int
}

func (r *batchRecorder) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}
func (r *batchRecorder) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (r *batchRecorder) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	var sqls []string
	for _, q := range d.Batch.QueuedQueries {
		sqls = append(sqls, q.SQL)
	}
	r.started = append(r.started, sqls)
	return ctx
}

func (r *batchRecorder) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.queries = append(r.queries, d.SQL)
}

func (r *batchRecorder) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ended++
}

// TestPipelineTracesBatches: a pool's tracer that traces batches hears of
// each pipelined batch and of each of its statements.
func TestPipelineTracesBatches(t *testing.T) {
	pc, err := pgxpool.ParseConfig(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	rec := &batchRecorder{}
	pc.ConnConfig.Tracer = rec
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	p := newPipeline(pool, 1, 16, new(leftcalls.Counter))
	blocked := make(chan error, 1)
	go func() {
		_, err := p.exec(context.Background(), "SELECT pg_sleep(0.2)")
		blocked <- err
	}()
	waitFor(t, p, func() bool { return p.running == 1 && len(p.queue) == 0 })
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() {
			var n int64
			if err := p.queryRow(context.Background(), "SELECT $1::int8", []any{i}, &n); err != nil || n != int64(i) {
				t.Errorf("SELECT %d = %d, %v", i, n, err)
			}
		})
	}
	wg.Wait()
	if err := <-blocked; err != nil {
		t.Fatal(err)
	}
	// The runner reports the batch's end after it finished the calls.
	waitFor(t, p, func() bool { return p.running == 0 })
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.started) != 1 || len(rec.started[0]) != 3 || len(rec.queries) != 3 || rec.ended != 1 {
		t.Errorf("traced batches %q, queries %q, %d ended; want one batch of the three SELECTs", rec.started, rec.queries, rec.ended)
	}
}

// TestPipelineBatchEndsWhenEveryCallerGaveUp: a batch whose callers have
// no deadline, and have all given up (their contexts cancelled), is cut
// short: its lane does not wait for a statement nobody waits for any more.
func TestPipelineBatchEndsWhenEveryCallerGaveUp(t *testing.T) {
	p, pool, busy := pipelineOnOneLane(t)
	ctx := context.Background()
	t.Cleanup(func() {
		// The server finishes the statement even after the client left.
		_, _ = pool.Exec(context.Background(), `SELECT pg_cancel_backend(pid) FROM pg_stat_activity
			WHERE query LIKE '%nobody waits%' AND pid <> pg_backend_pid()`)
	})
	done := busy(100 * time.Millisecond)
	cctx, cancel := context.WithCancel(ctx) // no deadline, as a request's context
	defer cancel()
	returned := make(chan error, 1)
	go func() {
		_, err := p.exec(cctx, "SELECT pg_sleep(20), 'nobody waits'")
		returned <- err
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Until the statement runs on the server: it was sent in a batch.
	waitActive(t, pool, `query LIKE '%nobody waits%' AND state = 'active'`, "the statement did not start")
	cancel()
	if err := <-returned; !errors.Is(err, context.Canceled) {
		t.Fatalf("exec = %v, want context.Canceled", err)
	}
	// The lane is free again well before the statement would end.
	waitFor(t, p, func() bool { return p.running == 0 })
	var one int64
	if err := p.queryRow(ctx, "SELECT 1::int8", nil, &one); err != nil || one != 1 {
		t.Fatalf("SELECT 1 after the abandoned batch = %d, %v", one, err)
	}
}

// TestPurgeDoesNotWaitForThePipeline: with Config.Pipeline, PurgeExpired
// runs its DELETEs on a connection of its own: sent in a batch, a purge of
// thousands of rows would hold up every call sharing that batch, and it
// would wait behind batches of calls it has nothing to do with.
func TestPurgeDoesNotWaitForThePipeline(t *testing.T) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s, err := New(pool, Config{Pipeline: true, PipelineLanes: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	p := s.lease.q.(*pipeline)
	done := make(chan error, 1)
	go func() { // the only lane, busy for 3s
		_, err := p.exec(ctx, "SELECT pg_sleep(3)")
		done <- err
	}()
	waitFor(t, p, func() bool { return p.running == 1 && len(p.queue) == 0 })
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := s.PurgeExpired(pctx, idem.MustNamespace("purge"), time.Now()); err != nil {
		t.Errorf("PurgeExpired while the pipeline's lane is busy: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestPipelineReleasesABeginNobodyHeard: a Begin whose caller gave up
// after it was sent in a batch still runs, and writes a reservation whose
// lease only the store ever saw. The store releases it once the answer
// comes, so the key is free at once rather than in flight, under a lease
// nobody holds, until that lease lapses.
func TestPipelineReleasesABeginNobodyHeard(t *testing.T) {
	ctx := context.Background()
	s, p, pool, key, req := oneLaneStore(t, Config{Lease: time.Minute}, "orphan")

	// The only lane is busy; a slow statement, then the Begin, queue
	// behind it and go out as one batch, the Begin waiting on the server
	// behind the slow statement.
	leaveABeginInABatch(t, s, p, pool, key, req, time.Second)()
	// The Begin ran after the slow statement; its reservation is released
	// at once, not held for the minute of its lease.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		o, err := s.Begin(ctx, key, req, nil)
		if err != nil {
			t.Fatal(err)
		}
		if o.Kind == idem.Fresh {
			if o.TakenOver {
				t.Errorf("the next Begin took the key over: the reservation was not released")
			}
			break
		}
		if o.Kind != idem.InFlight || time.Now().After(deadline) {
			t.Fatalf("Begin after the abandoned one = %s, want Fresh within 5s", o.Kind)
		}
	}
}

// TestPipelineBatchNobodyWaitsForWritesNothing: a batch whose every
// caller gave up while a Begin in it waited on the server (for a row
// another transaction holds) has the server cancel that statement: cut
// off from its connection, the server would run it on, and the Begin
// would reserve the key once the row is free, under a lease nobody holds.
func TestPipelineBatchNobodyWaitsForWritesNothing(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	s, p, pool, key, req := oneLaneStore(t, Config{Lease: time.Minute, Now: func() time.Time { return now }}, "nobody-waits")
	if _, err := s.Begin(ctx, key, req, &idem.BeginOpts{Retention: time.Second, Lease: time.Second}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Second) // the record expired: the next Begin replaces it
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT FROM `+DefaultTable+` FOR UPDATE`); err != nil {
		t.Fatal(err)
	}

	// The only lane is busy, so the Begin goes out in a batch, alone.
	busy := keepBusy(t, p, 300*time.Millisecond)
	bctx, cancel := context.WithCancel(ctx)
	defer cancel()
	begun := make(chan error, 1)
	go func() {
		o, err := s.Begin(bctx, key, req, nil)
		if err == nil {
			err = fmt.Errorf("Begin answered %s", o.Kind)
		}
		begun <- err
	}()
	waitFor(t, p, func() bool { return len(p.queue) == 1 })
	if err := <-busy; err != nil {
		t.Fatal(err)
	}
	// Until the Begin waits on the server for the row.
	waitActive(t, pool, `wait_event_type = 'Lock' AND query LIKE '%pg_try_advisory_xact_lock%'`, "the Begin did not wait for the row")
	cancel()
	if err := <-begun; !errors.Is(err, context.Canceled) {
		t.Fatalf("Begin = %v, want context.Canceled", err)
	}
	waitFor(t, p, func() bool { return p.running == 0 })
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// Had the statement run on, it would have taken the row now.
	time.Sleep(200 * time.Millisecond)
	o, err := s.Begin(ctx, key, req, nil)
	if err != nil || o.Kind != idem.Fresh {
		t.Fatalf("the next Begin = %s, %v; want Fresh: the abandoned Begin reserved the key", o.Kind, err)
	}
}

// waitActive waits, up to 5 s, until one other session of pool's server
// matches where (a condition on pg_stat_activity), and fails the test
// naming what did not happen otherwise.
func waitActive(t testing.TB, pool *pgxpool.Pool, where, what string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		var n int
		if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE pid <> pg_backend_pid() AND `+where).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(what + " in 5s")
		}
	}
}

// oneLaneStore returns a migrated store made with cfg and a pipeline of
// one lane, that pipeline, the store's pool, a key "k" of namespace ns and
// a request for it.
func oneLaneStore(t *testing.T, cfg Config, ns string) (*Store, *pipeline, *pgxpool.Pool, idem.Key, idem.Request) {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	cfg.Pipeline, cfg.PipelineLanes = true, 1
	s, err := New(pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	key, err := idem.ParseKey(idem.MustNamespace(ns), "k")
	if err != nil {
		t.Fatal(err)
	}
	req, err := idem.NewRequest([]byte(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	return s, s.lease.q.(*pipeline), pool, key, req
}
