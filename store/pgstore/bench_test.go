package pgstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
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
	"github.com/idemgo/idem/idemtest"
	"github.com/idemgo/idem/internal/pgtest"
	"github.com/idemgo/idem/store/pgstore"
)

// benchWorkers is how many goroutines issue Begin+Commit pairs at once.
const benchWorkers = 32

// sqlRecorder is a pgx tracer that records the SQL text of the statements
// run while it is on, to replay exactly the store's statements in the
// plain-pgx baseline.
type sqlRecorder struct {
	mu  sync.Mutex
	on  bool
	sql []string
}

func (r *sqlRecorder) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.on {
		r.sql = append(r.sql, d.SQL)
	}
	return ctx
}

func (r *sqlRecorder) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// benchEnv is a migrated store on a pool of benchWorkers connections, and
// the SQL of its Begin and Commit.
type benchEnv struct {
	url           string
	pool          *pgxpool.Pool
	store         *pgstore.Store
	table         string
	begin, commit string
}

func newBenchEnv(b *testing.B, url string) *benchEnv {
	b.Helper()
	ctx := context.Background()
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		b.Fatal(err)
	}
	pc.MaxConns = benchWorkers
	rec := &sqlRecorder{}
	pc.ConnConfig.Tracer = rec
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	var schema string
	if err := pool.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		b.Fatal(err)
	}
	// Qualified, so that pgbench, which connects without the search_path,
	// runs the very same text.
	table := schema + ".bench_records"
	s, err := pgstore.New(pool, pgstore.Config{Table: table})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	k, err := idem.ParseKey(idemtest.RandomNamespace(b), "capture")
	if err != nil {
		b.Fatal(err)
	}
	rec.mu.Lock()
	rec.on = true
	rec.mu.Unlock()
	o, err := s.Begin(ctx, k, benchRequest, nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Commit(ctx, k, o.Lease, benchResult); err != nil {
		b.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.on = false
	if len(rec.sql) != 2 {
		b.Fatalf("Begin+Commit ran %d statements, want 2", len(rec.sql))
	}
	return &benchEnv{url: url, pool: pool, store: s, table: table, begin: rec.sql[0], commit: rec.sql[1]}
}

var (
	benchRequest = func() idem.Request {
		r, err := idem.NewRequest([]byte(`{"amount":100,"currency":"EUR"}`))
		if err != nil {
			panic(err)
		}
		return r
	}()
	benchResult = []byte(`{"id":"ch_1","amount":100}`)
)

// benchKeys returns n distinct keys of a new namespace.
func benchKeys(b *testing.B, n int) []idem.Key {
	ns := idemtest.RandomNamespace(b)
	ks := make([]idem.Key, n)
	for i := range ks {
		k, err := idem.ParseKey(ns, "key-"+strconv.Itoa(i))
		if err != nil {
			b.Fatal(err)
		}
		ks[i] = k
	}
	return ks
}

// parallel runs op(i) for i in [0, n) on benchWorkers goroutines and
// returns the wall time.
func parallel(n int, op func(i int) error) (time.Duration, error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Value
	start := time.Now()
	for range benchWorkers {
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
		return d, err
	}
	return d, nil
}

// storePairs runs n Begin+Commit pairs on fresh keys through the store.
func (e *benchEnv) storePairs(b *testing.B, n int) time.Duration {
	ks := benchKeys(b, n)
	ctx := context.Background()
	d, err := parallel(n, func(i int) error {
		o, err := e.store.Begin(ctx, ks[i], benchRequest, nil)
		if err != nil {
			return err
		}
		if o.Kind != idem.Fresh {
			return fmt.Errorf("outcome %s", o.Kind)
		}
		return e.store.Commit(ctx, ks[i], o.Lease, benchResult)
	})
	if err != nil {
		b.Fatal(err)
	}
	return d
}

// pgxPairs runs the same two statements, with the same arguments, through
// the pool directly: the floor for what the store adds.
func (e *benchEnv) pgxPairs(b *testing.B, n int) time.Duration {
	ks := benchKeys(b, n)
	ctx := context.Background()
	fp := benchRequest.Fingerprint.Bytes()
	d, err := parallel(n, func(i int) error {
		k := ks[i]
		ns, value := string(k.Namespace()), k.Value()
		now := time.Now().Truncate(time.Microsecond)
		token := idem.NewToken()
		var (
			got                           sql.NullBool
			fence, curFence               sql.NullInt64
			status                        sql.NullString
			hash, p1, p2, p3              []byte
			created, expires, curLeaseEnd sql.NullTime
		)
		err := e.pool.QueryRow(ctx, e.begin, ns, "", value, fp, benchRequest.Payload, now,
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
	if err != nil {
		b.Fatal(err)
	}
	return d
}

// pgbenchTPS runs the store's two statements as a pgbench script, with
// benchWorkers clients for d, and returns pgbench's transactions (pairs)
// per second; 0 and a reason when pgbench cannot run.
func (e *benchEnv) pgbenchTPS(d time.Duration) (float64, string) {
	bin, err := exec.LookPath("pgbench")
	if err != nil {
		return 0, "pgbench not installed"
	}
	conn, err := withoutSearchPath(e.url)
	if err != nil {
		return 0, err.Error()
	}
	fp := fmt.Sprintf(`'\x%x'::bytea`, benchRequest.Fingerprint.Bytes())
	ts := func(t time.Time) string { return "'" + t.UTC().Format(time.RFC3339Nano) + "'" }
	now := time.Now().Truncate(time.Microsecond)
	quote := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
	ns := quote("bench_" + strconv.FormatInt(now.UnixNano(), 36))
	// pgbench variables are bound as parameters (-M prepared); the rest
	// are literals. Keys are random in a space large enough that a
	// repeat, which would replay instead of create, is negligible.
	begin := placeholders(e.begin, map[int]string{
		1: ns, 2: "''", 3: ":k", 4: fp, 5: quote(string(benchRequest.Payload)),
		6: ts(now), 7: ts(now.Add(idem.DefaultRetention)), 8: ts(now.Add(time.Hour)),
		9: "'pgbench-token'", 10: ":k",
	})
	commit := placeholders(e.commit, map[int]string{
		1: ns, 2: "''", 3: ":k", 4: "'pgbench-token'", 5: "1", 6: ts(now), 7: quote(string(benchResult)),
	})
	script := "\\set k random(1, 9000000000000000000)\n" + oneLine(begin) + ";\n" + oneLine(commit) + ";\n"
	f, err := os.CreateTemp("", "pgstore_bench_*.sql")
	if err != nil {
		return 0, err.Error()
	}
	defer os.Remove(f.Name())
	if _, err := f.WriteString(script); err != nil {
		return 0, err.Error()
	}
	_ = f.Close()
	_ = os.Chmod(f.Name(), 0o644)
	out, err := exec.Command(bin, "-n", "-M", "prepared", "-c", strconv.Itoa(benchWorkers), "-j", "2",
		"-T", strconv.Itoa(int(d.Seconds())), "-f", f.Name(), conn).CombinedOutput()
	if err != nil {
		return 0, fmt.Sprintf("pgbench: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`tps = ([0-9.]+)`).FindSubmatch(out)
	if m == nil {
		return 0, fmt.Sprintf("pgbench printed no tps:\n%s", out)
	}
	if !strings.Contains(string(out), "number of failed transactions: 0 ") {
		return 0, fmt.Sprintf("pgbench transactions failed:\n%s", out)
	}
	tps, _ := strconv.ParseFloat(string(m[1]), 64)
	return tps, ""
}

// placeholders replaces $n in sql with vals[n] (longest numbers first).
func placeholders(sql string, vals map[int]string) string {
	for n := len(vals); n >= 1; n-- {
		sql = strings.ReplaceAll(sql, "$"+strconv.Itoa(n), vals[n])
	}
	return sql
}

// oneLine joins a statement's lines: a pgbench script has one SQL command
// per line.
func oneLine(sql string) string {
	return strings.Join(strings.Fields(sql), " ")
}

// withoutSearchPath drops the search_path parameter pgtest adds to its URLs,
// which libpq does not accept.
func withoutSearchPath(conn string) (string, error) {
	u, err := url.Parse(conn)
	if err != nil {
		return "", err
	}
	q := u.Query()
	q.Del("search_path")
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// benchSlice is how many pairs each side runs per turn: short turns, many of
// them, so that the machine's changing load (it is often shared) weighs
// on every side alike.
const benchSlice = 256

// BenchmarkLeaseBeginCommit measures Begin+Commit pairs on fresh keys in
// lease mode with 32 concurrent workers, and reports, beside ns per pair
// and pairs/s:
//
//   - throughput-ratio: pairs/s through the store divided by pairs/s of the same
//     two statements, with the same arguments, issued by a plain pgx loop
//     on the same pool (target ≥ 0.9), and x-baseline, its inverse (time
//     per pair relative to the pgx loop, as the bench module reports);
//   - pgbench-throughput-ratio: pairs/s through the store divided by pgbench's
//     transactions/s running the same two statements with 32 clients
//     against the same server (when pgbench is installed; only in the
//     final round, with b.N ≥ 1000).
//
// The store, the pgx loop and pgbench take turns in slices of the run.
// Every pair creates a record: the table grows by 2×b.N rows.
func BenchmarkLeaseBeginCommit(b *testing.B) {
	e := newBenchEnv(b, pgtest.URL(b))
	e.storePairs(b, 2*benchWorkers) // warm every connection's statement cache
	e.pgxPairs(b, 2*benchWorkers)
	withPgbench := b.N >= 1000
	b.ResetTimer()
	b.StopTimer()
	var own, base time.Duration
	var pgbenchTPS float64
	reason := ""
	rounds := (b.N + benchSlice - 1) / benchSlice
	// Two 3-second pgbench runs: before the first turn, where the store
	// goes first, and before a turn in the middle where the pgx loop
	// does, so that the aftermath of pgbench's load (autovacuum of its
	// rows) weighs on both sides alike.
	mid := rounds/2 | 1
	for r := range rounds {
		if withPgbench && reason == "" && (r == 0 || r == mid) {
			t, why := e.pgbenchTPS(3 * time.Second)
			pgbenchTPS, reason = pgbenchTPS+t/2, why
		}
		n := min(benchSlice, b.N-r*benchSlice)
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
	ownRate := float64(b.N) / own.Seconds()
	b.ReportMetric(ownRate, "pairs/s")
	b.ReportMetric(ownRate/(float64(b.N)/base.Seconds()), "throughput-ratio")
	b.ReportMetric(own.Seconds()/base.Seconds(), "x-baseline")
	b.ReportMetric(float64(base.Nanoseconds())/float64(b.N), "baseline-ns/op")
	switch {
	case !withPgbench:
	case reason != "":
		b.Log("no pgbench comparison: " + reason)
	default:
		b.ReportMetric(ownRate/pgbenchTPS, "pgbench-throughput-ratio")
	}
}
