package bench

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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
// The store, the pgx loop and pgbench take turns in slices of the run, the
// first two in alternating order, so that a drift in the machine's load
// weighs on all sides alike. Reported: "x-baseline" (the store's time per
// pair over the pgx loop's; at most 1/0.9 ≈ 1.11 is the target),
// "throughput-ratio" (its inverse: pairs/s over the pgx loop's, target at
// least 0.9), "baseline-ns/op", "pairs/s" and, with pgbench installed and
// b.N ≥ 1000, "pgbench-throughput-ratio" (pairs/s over pgbench's
// transactions/s, two 3-second runs of 32 clients).

// pgsWorkers is how many goroutines (and pgbench clients) run pairs at once.
const pgsWorkers = 32

// pgsSlice is how many pairs each side runs per turn: short turns, many of
// them, so that the machine's changing load (it is often shared) weighs
// on every side alike.
const pgsSlice = 256

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
	// begin, Begin, INSERT, Commit, commit
	if len(rec.sql) != 5 {
		b.Fatalf("a transactional pair ran %d statements, want 5: %q", len(rec.sql), rec.sql)
	}
	e.commitTx = rec.sql[3]
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

// keys returns n keys never used before in this environment.
func (e *pgsEnv) keys(b *testing.B, n int) []idem.Key {
	ns := idem.MustNamespace("pgstore_bench")
	ks := make([]idem.Key, n)
	for i := range ks {
		k, err := idem.ParseKey(ns, "key-"+strconv.FormatInt(e.keySeq.Add(1), 10))
		if err != nil {
			b.Fatal(err)
		}
		ks[i] = k
	}
	return ks
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
	fp := benchReq.Fingerprint.Bytes()
	return pgsParallel(b, e.workers, n, func(i int) error {
		ns, value := string(ks[i].Namespace()), ks[i].Value()
		now := time.Now().Truncate(time.Microsecond)
		token := idem.NewToken()
		var (
			got                           sql.NullBool
			fence, curFence               sql.NullInt64
			status                        sql.NullString
			hash, p1, p2, p3              []byte
			created, expires, curLeaseEnd sql.NullTime
		)
		err := e.pool.QueryRow(ctx, e.begin, ns, "", value, fp, benchReq.Payload, now,
			now.Add(idem.DefaultRetention), now.Add(idem.DefaultLease), token, e.table+"\x1f"+ns+"\x1f\x1f"+value).
			Scan(&got, &fence, &status, &hash, &p1, &p2, &p3, &curFence, &created, &expires, &curLeaseEnd)
		if err != nil {
			return err
		}
		if !fence.Valid {
			return fmt.Errorf("baseline Begin did not create the record")
		}
		tag, err := e.pool.Exec(ctx, e.commit, ns, "", value, token, fence.Int64, now, benchResult)
		if err != nil {
			return err
		}
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("baseline Commit changed %d rows", tag.RowsAffected())
		}
		return nil
	})
}

// pgbenchTxTPS runs the transactional pair as a pgbench script (BEGIN, the
// store's Begin, the business row, the store's transactional Commit, END)
// with pgsWorkers clients for d.
func (e *pgsEnv) pgbenchTxTPS(d time.Duration) (float64, string) {
	now := time.Now().Truncate(time.Microsecond)
	quote := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
	ts := func(t time.Time) string { return quote(t.UTC().Format(time.RFC3339Nano)) }
	ns := quote("pgbtx_" + strconv.FormatInt(now.UnixNano(), 36))
	begin := pgsPlaceholders(e.begin, map[int]string{
		1: ns, 2: "''", 3: ":k", 4: fmt.Sprintf(`'\x%x'::bytea`, benchReq.Fingerprint.Bytes()),
		5: quote(string(benchReq.Payload)), 6: ts(now), 7: ts(now.Add(idem.DefaultRetention)),
		8: ts(now.Add(time.Hour)), 9: "'pgbench-token'", 10: ":k",
	})
	commit := pgsPlaceholders(e.commitTx, map[int]string{
		1: ns, 2: "''", 3: ":k", 4: "'pgbench-token'", 5: "1", 6: ts(now), 7: quote(string(benchResult)), 8: ":k",
	})
	insert := "INSERT INTO " + e.schema() + ".business (k) VALUES (" + ns + " || :k)"
	oneLine := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	script := "\\set k random(1, 9000000000000000000)\nBEGIN;\n" + oneLine(begin) + ";\n" + insert + ";\n" + oneLine(commit) + ";\nEND;\n"
	return e.runPgbench(script, d)
}

// pgbenchTPS runs the store's two statements as a pgbench script with
// pgsWorkers clients for d and returns pgbench's transactions (pairs) per
// second, or 0 and the reason it could not.
func (e *pgsEnv) pgbenchTPS(d time.Duration) (float64, string) {
	now := time.Now().Truncate(time.Microsecond)
	quote := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
	ts := func(t time.Time) string { return quote(t.UTC().Format(time.RFC3339Nano)) }
	ns := quote("pgbench_" + strconv.FormatInt(now.UnixNano(), 36))
	// :k is bound as a parameter (-M prepared), the rest are literals. Keys
	// are random in a space where a repeat, which would replay instead of
	// create, is negligible.
	begin := pgsPlaceholders(e.begin, map[int]string{
		1: ns, 2: "''", 3: ":k", 4: fmt.Sprintf(`'\x%x'::bytea`, benchReq.Fingerprint.Bytes()),
		5: quote(string(benchReq.Payload)), 6: ts(now), 7: ts(now.Add(idem.DefaultRetention)),
		8: ts(now.Add(time.Hour)), 9: "'pgbench-token'", 10: ":k",
	})
	commit := pgsPlaceholders(e.commit, map[int]string{
		1: ns, 2: "''", 3: ":k", 4: "'pgbench-token'", 5: "1", 6: ts(now), 7: quote(string(benchResult)),
	})
	oneLine := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	script := "\\set k random(1, 9000000000000000000)\n" + oneLine(begin) + ";\n" + oneLine(commit) + ";\n"
	return e.runPgbench(script, d)
}

// runPgbench runs script with pgsWorkers clients for d and returns the
// transactions per second, or 0 and the reason it could not.
func (e *pgsEnv) runPgbench(script string, d time.Duration) (float64, string) {
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
	out, err := exec.Command(bin, "-n", "-M", "prepared", "-c", strconv.Itoa(pgsWorkers), "-j", "2",
		"-T", strconv.Itoa(int(d.Seconds())), "-f", f.Name(), e.url).CombinedOutput()
	if err != nil {
		return 0, fmt.Sprintf("pgbench: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "number of failed transactions: 0 ") {
		return 0, fmt.Sprintf("pgbench transactions failed:\n%s", out)
	}
	m := regexp.MustCompile(`tps = ([0-9.]+)`).FindSubmatch(out)
	if m == nil {
		return 0, fmt.Sprintf("pgbench printed no tps:\n%s", out)
	}
	tps, _ := strconv.ParseFloat(string(m[1]), 64)
	return tps, ""
}

// pgsPlaceholders replaces $n in sql with vals[n], longest numbers first.
func pgsPlaceholders(sql string, vals map[int]string) string {
	for n := len(vals); n >= 1; n-- {
		sql = strings.ReplaceAll(sql, "$"+strconv.Itoa(n), vals[n])
	}
	return sql
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

func benchPgstore(b *testing.B, e *pgsEnv, pgbench bool) {
	e.storePairs(b, 2*pgsWorkers) // warm every connection's statement cache
	e.pgxPairs(b, 2*pgsWorkers)
	withPgbench := pgbench && b.N >= 1000
	b.ResetTimer()
	b.StopTimer()
	var own, base time.Duration
	var tps float64
	reason := ""
	rounds := (b.N + pgsSlice - 1) / pgsSlice
	// Two 3-second pgbench runs: before the first turn, where the store
	// goes first, and before a turn in the middle where the pgx loop
	// does, so that the aftermath of pgbench's load (autovacuum of its
	// rows) weighs on both sides alike.
	mid := rounds/2 | 1
	for r := range rounds {
		if withPgbench && reason == "" && (r == 0 || r == mid) {
			t, why := e.pgbenchTPS(3 * time.Second)
			tps, reason = tps+t/2, why
		}
		n := min(pgsSlice, b.N-r*pgsSlice)
		// Alternate which side goes first: a steady drift in load
		// favours neither.
		if r%2 == 1 {
			base += e.pgxPairs(b, n)
		}
		b.StartTimer()
		own += e.storePairs(b, n)
		b.StopTimer()
		if r%2 == 0 {
			base += e.pgxPairs(b, n)
		}
	}
	rate := float64(b.N) / own.Seconds()
	b.ReportMetric(rate, "pairs/s")
	b.ReportMetric(own.Seconds()/base.Seconds(), "x-baseline")
	b.ReportMetric(base.Seconds()/own.Seconds(), "throughput-ratio")
	b.ReportMetric(float64(base.Nanoseconds())/float64(b.N), "baseline-ns/op")
	switch {
	case !withPgbench:
	case reason != "":
		b.Log("no pgbench comparison: " + reason)
	default:
		b.ReportMetric(rate/tps, "pgbench-throughput-ratio")
	}
}

// BenchmarkPgstoreTxBeginCommit: transactional mode, 32 workers, each pair
// a transaction of Begin, a business row and Commit, beside pgbench running
// the same transaction as a script ("pgbench-throughput-ratio", higher is
// better).
func BenchmarkPgstoreTxBeginCommit(b *testing.B) {
	e := newPgsEnv(b)
	ctx := context.Background()
	var tps float64
	reason := ""
	b.ResetTimer()
	b.StopTimer()
	var own time.Duration
	rounds := (b.N + pgsSlice - 1) / pgsSlice
	mid := rounds/2 | 1
	for r := range rounds {
		if b.N >= 1000 && reason == "" && (r == 0 || r == mid) {
			t, why := e.pgbenchTxTPS(3 * time.Second)
			tps, reason = tps+t/2, why
		}
		n := min(pgsSlice, b.N-r*pgsSlice)
		ks := e.keys(b, n)
		b.StartTimer()
		own += pgsParallel(b, e.workers, n, func(i int) error { return e.txPair(ctx, ks[i]) })
		b.StopTimer()
	}
	rate := float64(b.N) / own.Seconds()
	b.ReportMetric(rate, "pairs/s")
	switch {
	case b.N < 1000:
	case reason != "":
		b.Log("no pgbench comparison: " + reason)
	default:
		b.ReportMetric(rate/tps, "pgbench-throughput-ratio")
	}
}
