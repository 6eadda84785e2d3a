package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/store/pgstore"
)

// The pgstore benchmark: Begin+Commit pairs in lease mode with 32
// concurrent workers, against the same two statements with the same
// arguments issued by a plain pgx loop on the same pool and by pgbench, on
// the server TEST_DATABASE_URL names (make bench provides one; without it
// the benchmark is skipped).
//
// The store, the pgx loop and pgbench take turns, in orders that change
// from round to round (see pgsOrders), so that a drift in the machine's
// load, and whatever one side leaves behind for the next, weigh on all
// sides alike. Reported: "x-baseline" (the store's time per pair over the
// pgx loop's; at most 1/0.9 ≈ 1.11 is the target), "throughput-ratio" (its
// inverse: pairs/s over the pgx loop's, target at least 0.9),
// "baseline-ns/op", "pairs/s" and, with pgbench installed and b.N ≥ 1000,
// "pgbench-throughput-ratio" (the store's pairs/s over pgbench's
// transactions/s) and "pgx-pgbench-throughput-ratio" (the pgx loop's over
// pgbench's: the ceiling of a Go client on this machine, since client CPU
// per pair matters when client and server share few cores).
//
// What makes the comparison even, in both directions:
//   - The same statements: the store's own SQL, recorded by a tracer, run
//     by pgbench with -M prepared, every parameter a parameter (the store's
//     values passed with -D, the key as :k), as the pgx loop binds them;
//     only the empty scope is a literal (pgbench takes no empty -D value).
//     pgbench sends every value as text; pgx sends timestamps, integers
//     and bytea in binary, which the server reads slightly faster.
//   - The same keys: pgbench draws random numbers; the Go sides use
//     distinct numbers spread as randomly over the same kind of text (see
//     keys), not consecutive ones that would all land on one index page.
//   - The same concurrency: 32 pgbench clients on GOMAXPROCS threads (-j),
//     32 goroutines on GOMAXPROCS.
//   - Steady state: turns of about pgsSlice pairs (2,048) per Go side, on
//     a warm pool, so that starting and draining 32 workers per turn costs
//     them 1–2%; pgbench turns of pgbenchTurn (3 s), of which only the
//     last two seconds count (pgbench -P 1): each turn starts 32 new
//     backends, which connect, fill their caches and plan their first
//     executions cold, a cost the Go sides do not pay per turn. pgbench
//     has no drain to pay either; what is left is in its favour.

// pgsWorkers is how many goroutines (and pgbench clients) run pairs at once.
const pgsWorkers = 32

// pgsSlice is how many pairs, at most, each Go side runs per turn: turns short
// enough that there are many of them, so that the machine's changing load
// (it is often shared) weighs on every side alike, and long enough (64
// pairs per worker) that starting and draining the workers costs little.
const pgsSlice = 2048

// pgbenchTurn is how long each pgbench turn runs; its first second, the
// warm-up, is left out of the figure.
const pgbenchTurn = 3 * time.Second

// pgsRecorder is a pgx tracer that records the SQL text of the statements
// run while it is on: the baseline replays the store's very statements.
type pgsRecorder struct {
	mu  sync.Mutex
	on  bool
	sql []string
}

func (r *pgsRecorder) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.on {
		r.sql = append(r.sql, d.SQL)
	}
	return ctx
}

func (r *pgsRecorder) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// The statements of a batch are recorded as if sent one by one.
func (r *pgsRecorder) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (r *pgsRecorder) TraceBatchQuery(ctx context.Context, c *pgx.Conn, d pgx.TraceBatchQueryData) {
	r.TraceQueryStart(ctx, c, pgx.TraceQueryStartData{SQL: d.SQL})
}

func (r *pgsRecorder) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// pgsEnv is a migrated store in a schema of its own, on a pool of
// pgsWorkers connections, and the SQL of its Begin and Commit.
type pgsEnv struct {
	url           string
	pool          *pgxpool.Pool
	store         *pgstore.Store
	table         string
	begin, commit string
	commitTx      string // Commit's statement in transactional mode
	keySeq        atomic.Int64
	workers       int // goroutines running pairs at once
}

func newPgsEnv(b *testing.B) *pgsEnv {
	b.Helper()
	url := os.Getenv("TEST_DATABASE_URL")
	if url == "" {
		b.Skip("TEST_DATABASE_URL is not set (make bench sets it)")
	}
	ctx := context.Background()
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		b.Fatal(err)
	}
	pc.MaxConns = pgsWorkers
	rec := &pgsRecorder{}
	pc.ConnConfig.Tracer = rec
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	var r [6]byte
	_, _ = rand.Read(r[:])
	schema := "pgstore_bench_" + hex.EncodeToString(r[:])
	b.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
	})
	// Qualified, so that pgbench runs the very same text; Migrate creates
	// the schema.
	table := schema + ".records"
	s, err := pgstore.New(pool, pgstore.Config{Table: table})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	e := &pgsEnv{url: url, pool: pool, store: s, table: table, workers: pgsWorkers}
	k := e.keys(b, 1)[0]
	rec.mu.Lock()
	rec.on = true
	rec.mu.Unlock()
	o, err := s.Begin(ctx, k, benchReq, nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Commit(ctx, k, o.Lease, benchResult); err != nil {
		b.Fatal(err)
	}
	rec.mu.Lock()
	rec.on = false
	if len(rec.sql) != 2 {
		rec.mu.Unlock()
		b.Fatalf("Begin+Commit ran %d statements, want 2", len(rec.sql))
	}
	e.begin, e.commit = rec.sql[0], rec.sql[1]
	rec.mu.Unlock()
	// The same in transactional mode, with a business row between.
	if _, err := pool.Exec(ctx, "CREATE TABLE "+schema+".business (k text PRIMARY KEY)"); err != nil {
		b.Fatal(err)
	}
	rec.mu.Lock()
	rec.sql, rec.on = nil, true
	rec.mu.Unlock()
	if err := e.txPair(ctx, e.keys(b, 1)[0]); err != nil {
		b.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.on = false
	// begin, SAVEPOINT and Begin (sent together), INSERT, Commit, commit.
	// The baseline leaves the SAVEPOINT out: it is the store's own cost.
	if len(rec.sql) != 6 || !strings.HasPrefix(rec.sql[1], "SAVEPOINT ") || rec.sql[2] != e.begin {
		b.Fatalf("a transactional pair ran %d statements, want 6 (the second a SAVEPOINT, the third Begin's): %q", len(rec.sql), rec.sql)
	}
	e.commitTx = rec.sql[4]
	return e
}

// txPair is one transactional-mode pair: Begin, a business row and Commit
// in one transaction.
func (e *pgsEnv) txPair(ctx context.Context, k idem.Key) error {
	return pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		s := e.store.WithTx(tx)
		o, err := s.Begin(ctx, k, benchReq, nil)
		if err != nil {
			return err
		}
		if o.Kind != idem.Fresh {
			return fmt.Errorf("outcome %s", o.Kind)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO "+e.schema()+".business (k) VALUES ($1)", k.Value()); err != nil {
			return err
		}
		return s.Commit(ctx, k, o.Lease, benchResult)
	})
}

// schema is the schema of the env's tables.
func (e *pgsEnv) schema() string { s, _, _ := strings.Cut(e.table, "."); return s }

// keys returns n keys never used before in this environment: decimal
// numbers spread over the uint64 range (a bijective mix of a counter, so
// never a repeat), like the random keys of the pgbench scripts and like
// real idempotency keys, which are random.
func (e *pgsEnv) keys(b *testing.B, n int) []idem.Key {
	ns := idem.MustNamespace("pgstore_bench")
	ks := make([]idem.Key, n)
	for i := range ks {
		k, err := idem.ParseKey(ns, strconv.FormatUint(pgsMix(uint64(e.keySeq.Add(1))), 10))
		if err != nil {
			b.Fatal(err)
		}
		ks[i] = k
	}
	return ks
}

// pgsMix is the bijective finaliser of SplitMix64.
func pgsMix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// pgsParallel runs op(i) for i in [0, n) on workers goroutines and
// returns the wall time.
func pgsParallel(b *testing.B, workers, n int, op func(i int) error) time.Duration {
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Value
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := op(i); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	d := time.Since(start)
	if err, _ := firstErr.Load().(error); err != nil {
		b.Fatal(err)
	}
	return d
}

// storePairs runs n Begin+Commit pairs on fresh keys through the store.
func (e *pgsEnv) storePairs(b *testing.B, n int) time.Duration {
	ks := e.keys(b, n)
	ctx := context.Background()
	return pgsParallel(b, e.workers, n, func(i int) error {
		o, err := e.store.Begin(ctx, ks[i], benchReq, nil)
		if err != nil {
			return err
		}
		if o.Kind != idem.Fresh {
			return fmt.Errorf("outcome %s", o.Kind)
		}
		return e.store.Commit(ctx, ks[i], o.Lease, benchResult)
	})
}

// pgxPairs runs the store's two statements, with the arguments the store
// would pass, through the pool directly.
func (e *pgsEnv) pgxPairs(b *testing.B, n int) time.Duration {
	ks := e.keys(b, n)
	ctx := context.Background()
	return pgsParallel(b, e.workers, n, func(i int) error {
		return e.pgxPair(ctx, e.pool, ks[i], false)
	})
}

// txPgxPairs runs the transactional pair's statements, with the arguments
// the store would pass, through pgx directly: begin, the store's Begin, the
// business row, the store's transactional Commit, commit.
func (e *pgsEnv) txPgxPairs(b *testing.B, n int) time.Duration {
	ks := e.keys(b, n)
	ctx := context.Background()
	return pgsParallel(b, e.workers, n, func(i int) error {
		return pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
			return e.pgxPair(ctx, tx, ks[i], true)
		})
	})
}

// pgsDB is a pool or a transaction.
type pgsDB interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// pgxPair runs the store's Begin and Commit statements on db, and in
// transactional mode (tx) the business row between them, with the
// arguments the store would pass, scanning Begin's row as the store does.
func (e *pgsEnv) pgxPair(ctx context.Context, db pgsDB, k idem.Key, tx bool) error {
	ns, value := string(k.Namespace()), k.Value()
	now := time.Now().Truncate(time.Microsecond)
	token := idem.NewToken()
	lock := e.table + "\x1f" + ns + "\x1f\x1f" + value
	var (
		got                           pgtype.Bool
		fence, curFence               pgtype.Int8
		status                        pgtype.Text
		hash, p1, p2, p3              []byte
		created, expires, curLeaseEnd pgtype.Timestamptz
	)
	err := db.QueryRow(ctx, e.begin, ns, "", value, benchReq.Fingerprint.Bytes(), benchReq.Payload, now,
		now.Add(idem.DefaultRetention), now.Add(idem.DefaultLease), token, lock).
		Scan(&got, &fence, &status, &hash, &p1, &p2, &p3, &curFence, &created, &expires, &curLeaseEnd)
	if err != nil {
		return err
	}
	if !fence.Valid {
		return fmt.Errorf("baseline Begin did not create the record")
	}
	var tag pgconn.CommandTag
	if tx {
		if _, err := db.Exec(ctx, "INSERT INTO "+e.schema()+".business (k) VALUES ($1)", value); err != nil {
			return err
		}
		tag, err = db.Exec(ctx, e.commitTx, ns, "", value, token, fence.Int64, now, benchResult, lock)
	} else {
		tag, err = db.Exec(ctx, e.commit, ns, "", value, token, fence.Int64, now, benchResult)
	}
	if err != nil {
		return err
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("baseline Commit changed %d rows", tag.RowsAffected())
	}
	return nil
}

// pgbenchTxTPS runs the transactional pair as a pgbench script (BEGIN, the
// store's Begin, the business row, the store's transactional Commit, END)
// with pgsWorkers clients for d.
func (e *pgsEnv) pgbenchTxTPS(d time.Duration) (float64, string) {
	v := e.pgbenchVars("pgbtx_")
	script := "\\set k random(1, 9000000000000000000)\nBEGIN;\n" +
		pgsOneLine(pgsPlaceholders(e.begin, "b", pgsBeginKeyParams)) + ";\n" +
		"INSERT INTO " + e.schema() + ".business (k) VALUES (:k);\n" +
		pgsOneLine(pgsPlaceholders(e.commitTx, "c", pgsSettleKeyParams)) + ";\nEND;\n"
	return e.runPgbench(script, v, d)
}

// pgbenchTPS runs the store's two statements as a pgbench script with
// pgsWorkers clients for d and returns pgbench's transactions (pairs) per
// second, or 0 and the reason it could not.
func (e *pgsEnv) pgbenchTPS(d time.Duration) (float64, string) {
	v := e.pgbenchVars("pgbench_")
	script := "\\set k random(1, 9000000000000000000)\n" +
		pgsOneLine(pgsPlaceholders(e.begin, "b", pgsBeginKeyParams)) + ";\n" +
		pgsOneLine(pgsPlaceholders(e.commit, "c", pgsSettleKeyParams)) + ";\n"
	return e.runPgbench(script, v, d)
}

// The parameters of the store's statements that pgbench binds to its
// random key :k: Begin's key_value ($3) and lock text ($10), a settle
// statement's key_value ($3) and, in transactional mode, lock text ($8).
// The store's lock text is the table, namespace, scope and key joined;
// pgbench's is the key alone, which hashes as fast.
var (
	pgsBeginKeyParams  = map[int]bool{3: true, 10: true}
	pgsSettleKeyParams = map[int]bool{3: true, 8: true}
)

// pgbenchVars returns the values pgbench binds to the store's statements'
// other parameters (:b1… for Begin's, :c1… for Commit's), as the store
// would pass them, in text: a namespace of the run's own,
// the request's fingerprint and payload, the store's timestamps and lease
// length, a token of the store's kind, fence 1 and the result.
func (e *pgsEnv) pgbenchVars(nsPrefix string) map[string]string {
	now := time.Now().Truncate(time.Microsecond)
	ts := func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
	ns := nsPrefix + strconv.FormatInt(now.UnixNano(), 36)
	token := idem.NewToken()
	return map[string]string{
		"b1": ns, "b4": fmt.Sprintf(`\x%x`, benchReq.Fingerprint.Bytes()),
		"b5": string(benchReq.Payload), "b6": ts(now), "b7": ts(now.Add(idem.DefaultRetention)),
		"b8": ts(now.Add(idem.DefaultLease)), "b9": token,
		"c1": ns, "c4": token, "c5": "1", "c6": ts(now), "c7": string(benchResult),
	}
}

// pgsOneLine puts a statement on one line, as a pgbench script needs.
func pgsOneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// runPgbench runs script with pgsWorkers clients on GOMAXPROCS threads for
// d, with the variables vars, and returns the transactions per second
// after the first second (the mean of pgbench's progress reports for
// the later seconds), or 0 and the reason it could not.
func (e *pgsEnv) runPgbench(script string, vars map[string]string, d time.Duration) (float64, string) {
	bin, err := exec.LookPath("pgbench")
	if err != nil {
		return 0, "pgbench not installed"
	}
	f, err := os.CreateTemp("", "pgstore_bench_*.sql")
	if err != nil {
		return 0, err.Error()
	}
	defer os.Remove(f.Name())
	if _, err := f.WriteString(script); err != nil {
		return 0, err.Error()
	}
	_ = f.Close()
	args := []string{"-n", "-M", "prepared", "-c", strconv.Itoa(pgsWorkers),
		"-j", strconv.Itoa(min(runtime.GOMAXPROCS(0), pgsWorkers)),
		"-T", strconv.Itoa(int(d.Seconds())), "-P", "1", "-f", f.Name()}
	for k, v := range vars {
		args = append(args, "-D", k+"="+v)
	}
	out, err := exec.Command(bin, append(args, e.url)...).CombinedOutput()
	if err != nil {
		return 0, fmt.Sprintf("pgbench: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "number of failed transactions: 0 ") {
		return 0, fmt.Sprintf("pgbench transactions failed:\n%s", out)
	}
	progress := regexp.MustCompile(`progress: [0-9.]+ s, ([0-9.]+) tps`).FindAllSubmatch(out, -1)
	p := regexp.MustCompile(`number of transactions actually processed: ([0-9]+)`).FindSubmatch(out)
	if len(progress) < 2 || p == nil {
		return 0, fmt.Sprintf("pgbench printed too little progress:\n%s", out)
	}
	var tps float64
	for _, m := range progress[1:] {
		t, _ := strconv.ParseFloat(string(m[1]), 64)
		tps += t / float64(len(progress)-1)
	}
	// Every transaction must have done what a pair does: created a record
	// and committed it (a repeated random key, which would replay instead,
	// is too unlikely to count).
	processed, _ := strconv.ParseInt(string(p[1]), 10, 64)
	var committed int64
	err = e.pool.QueryRow(context.Background(), "SELECT count(*) FROM "+e.table+" WHERE namespace = $1 AND status = 'committed'",
		vars["b1"]).Scan(&committed)
	if err != nil {
		return 0, err.Error()
	}
	if committed != processed {
		return 0, fmt.Sprintf("pgbench ran %d transactions but committed %d records", processed, committed)
	}
	return tps, ""
}

// pgsPlaceholders replaces each parameter $n in sql with the pgbench
// variable :k where key[n], else :prefix<n>; except $2, the scope, which
// is empty and stays a literal, since pgbench takes no empty -D value.
func pgsPlaceholders(sql, prefix string, key map[int]bool) string {
	return regexp.MustCompile(`\$[0-9]+`).ReplaceAllStringFunc(sql, func(p string) string {
		n, _ := strconv.Atoi(p[1:])
		switch {
		case key[n]:
			return ":k"
		case n == 2:
			return "''" // the scope; pgbench takes no empty -D value
		}
		return ":" + prefix + strconv.Itoa(n)
	})
}

// BenchmarkPgstoreBeginCommit: Begin+Commit pairs on fresh keys in lease
// mode, 32 workers, beside the pgx loop and pgbench (see above).
func BenchmarkPgstoreBeginCommit(b *testing.B) {
	benchPgstore(b, newPgsEnv(b), true)
}

// BenchmarkPgstoreBeginCommitSingle: the same with one worker, for the
// latency of a pair beside the pgx loop's.
func BenchmarkPgstoreBeginCommitSingle(b *testing.B) {
	e := newPgsEnv(b)
	e.workers = 1
	benchPgstore(b, e, false)
}

// BenchmarkPgstoreBeginCommitPipeline: the same pairs through a store with
// Config.Pipeline on the same pool and table, beside the same pgx loop and
// pgbench.
func BenchmarkPgstoreBeginCommitPipeline(b *testing.B) {
	e := newPgsEnv(b)
	e.pipelined(b)
	benchPgstore(b, e, true)
}

// BenchmarkPgstoreBeginCommitPipelineSingle: the pipelined store with one
// worker: a batch of one, for the latency beside the pgx loop's.
func BenchmarkPgstoreBeginCommitPipelineSingle(b *testing.B) {
	e := newPgsEnv(b)
	e.pipelined(b)
	e.workers = 1
	benchPgstore(b, e, false)
}

// pipelined makes e's store one with Config.Pipeline, on the same pool and
// table.
func (e *pgsEnv) pipelined(b *testing.B) {
	s, err := pgstore.New(e.pool, pgstore.Config{Table: e.table, Pipeline: true})
	if err != nil {
		b.Fatal(err)
	}
	e.store = s
}

func benchPgstore(b *testing.B, e *pgsEnv, pgbench bool) {
	e.storePairs(b, 2*pgsWorkers) // warm every connection's statement cache
	e.pgxPairs(b, 2*pgsWorkers)
	var tps func(time.Duration) (float64, string)
	if pgbench {
		tps = e.pgbenchTPS
	}
	pgsRounds(b, e.storePairs, e.pgxPairs, tps)
}

// pgsOrders are the orders of the turns in successive rounds (0 the
// store, 1 the pgx loop, 2 pgbench), cycled: over six rounds each side
// takes each place twice, and the store and the pgx loop come as often
// right after pgbench, and right after each other, as one another.
var pgsOrders = [6][3]int{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}}

// pgsRounds runs b.N pairs through own (the store, timed by b) and base
// (the pgx loop), in turns of about pgsSlice pairs, and, when tps is set
// and b.N ≥ 1000, a pgbench turn of pgbenchTurn in every round; the
// number of rounds is a multiple of six, the turns in the orders of
// pgsOrders. It reports the metrics described at the top of this file.
func pgsRounds(b *testing.B, own, base func(b *testing.B, n int) time.Duration, tps func(time.Duration) (float64, string)) {
	withPgbench := tps != nil && b.N >= 1000
	b.ResetTimer()
	b.StopTimer()
	var ownD, baseD time.Duration
	var tpsSum float64
	tpsTurns := 0
	reason := ""
	rounds := len(pgsOrders) * ((b.N + len(pgsOrders)*pgsSlice - 1) / (len(pgsOrders) * pgsSlice))
	slice := (b.N + rounds - 1) / rounds
	for r := range rounds {
		n := max(0, min(slice, b.N-r*slice))
		for _, side := range pgsOrders[r%len(pgsOrders)] {
			switch {
			case side == 0:
				b.StartTimer()
				ownD += own(b, n)
				b.StopTimer()
			case side == 1:
				baseD += base(b, n)
			case withPgbench && reason == "":
				t, why := tps(pgbenchTurn)
				tpsSum, reason = tpsSum+t, why
				tpsTurns++
			}
		}
	}
	rate := float64(b.N) / ownD.Seconds()
	baseRate := float64(b.N) / baseD.Seconds()
	b.ReportMetric(rate, "pairs/s")
	b.ReportMetric(ownD.Seconds()/baseD.Seconds(), "x-baseline")
	b.ReportMetric(rate/baseRate, "throughput-ratio")
	b.ReportMetric(float64(baseD.Nanoseconds())/float64(b.N), "baseline-ns/op")
	switch {
	case !withPgbench:
	case reason != "":
		b.Log("no pgbench comparison: " + reason)
	default:
		pgbenchRate := tpsSum / float64(tpsTurns)
		b.ReportMetric(rate/pgbenchRate, "pgbench-throughput-ratio")
		b.ReportMetric(baseRate/pgbenchRate, "pgx-pgbench-throughput-ratio")
	}
}

// BenchmarkPgstoreTxBeginCommit: transactional mode, 32 workers, each pair
// a transaction of Begin, a business row and Commit, beside the same
// transaction's statements from a plain pgx loop ("throughput-ratio") and
// from pgbench running it as a script ("pgbench-throughput-ratio"), higher
// is better.
func BenchmarkPgstoreTxBeginCommit(b *testing.B) {
	e := newPgsEnv(b)
	ctx := context.Background()
	txPairs := func(b *testing.B, n int) time.Duration {
		ks := e.keys(b, n)
		return pgsParallel(b, e.workers, n, func(i int) error { return e.txPair(ctx, ks[i]) })
	}
	txPairs(b, 2*pgsWorkers)
	e.txPgxPairs(b, 2*pgsWorkers)
	pgsRounds(b, txPairs, e.txPgxPairs, e.pgbenchTxTPS)
}
