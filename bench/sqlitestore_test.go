package bench

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/store/sqlitestore"
)

// The SQLite benchmarks compare sqlitestore with plain database/sql running
// the statements the store runs, with the same arguments, on a database of
// the same kind (a new WAL file with the settings the package documentation
// recommends, beside the store's), in the same run.
//
// A commit's cost is mostly the disk's (an fsync with synchronous=FULL),
// and on a shared machine that cost drifts by several times within seconds.
// So the two sides run interleaved, in alternating blocks of sqliteBlock
// operations, and each block alternates which side goes first: drift hits
// both alike. Reported: "x-baseline" (the store's time per op over the
// baseline's, at most 1/0.9 ≈ 1.11 is the target), "throughput-ratio" (its
// inverse: the store's pairs/s over the baseline's, target at least 0.9)
// and "baseline-ns/op".

// sqliteSync are the synchronous settings measured: FULL, recommended, and
// NORMAL, without an fsync per commit, where the store's own overhead shows.
var sqliteSync = []string{"FULL", "NORMAL"}

// The statements sqlitestore runs for a Begin of a new key (insert), for a
// Commit, and for a replay (the same insert, which finds the record, then
// read), with the default table. The baseline runs each on its own; the
// store, in lease mode, also wraps a Begin's in BEGIN IMMEDIATE … COMMIT
// (it reads the clock only once it holds the write lock), which counts
// as the store's own cost.
const (
	sqliteInsert = `INSERT INTO "idempotency_record" (namespace, scope, key_value, request_hash, request_payload,
	status, owner_token, fence, created_at, expires_at, lease_expires_at)
VALUES (?1, ?2, ?3, ?4, ?5, 'in_progress', ?6, 1, ?7, ?8, ?9)
ON CONFLICT (namespace, scope, key_value) DO NOTHING`
	sqliteCommit = `UPDATE "idempotency_record" SET status = 'committed', result_payload = ?7, lease_expires_at = NULL
WHERE namespace = ?1 AND scope = ?2 AND key_value = ?3 AND status = 'in_progress' AND owner_token = ?4 AND fence = ?5 AND expires_at > ?6`
	sqliteRead = `SELECT status, request_hash, request_payload, result_payload, error_payload,
	fence, created_at, expires_at, lease_expires_at FROM "idempotency_record" WHERE namespace = ?1 AND scope = ?2 AND key_value = ?3`
)

// sqliteDB opens a new migrated database named name in dir, with the
// recommended settings but synchronous=sync, and conns connections at most.
func sqliteDB(b *testing.B, dir, name, sync string, conns int) *sql.DB {
	b.Helper()
	dsn := filepath.Join(dir, name) + "?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)" +
		"&_pragma=synchronous(" + sync + ")&_pragma=foreign_keys(ON)&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		b.Fatal(err)
	}
	db.SetMaxOpenConns(conns)
	b.Cleanup(func() { _ = db.Close() })
	s, err := sqlitestore.New(db, sqlitestore.Config{})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Migrate(context.Background()); err != nil {
		b.Fatal(err)
	}
	return db
}

// sqlitePair is a store and a baseline on two new databases side by side.
func sqlitePair(b *testing.B, sync string, conns int, batch bool) (*sqlitestore.Store, *sqlitePlain) {
	b.Helper()
	dir := b.TempDir()
	s, err := sqlitestore.New(sqliteDB(b, dir, "store.db", sync, conns), sqlitestore.Config{Batch: batch})
	if err != nil {
		b.Fatal(err)
	}
	db := sqliteDB(b, dir, "plain.db", sync, conns)
	return s, &sqlitePlain{db: db, hash: benchReq.Fingerprint.Bytes(), payload: string(benchReq.Payload)}
}

func sqliteKeys(b *testing.B, n int) []idem.Key {
	ns := idem.MustNamespace("bench")
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

// sqlitePlain is the baseline: database/sql running the store's statements
// with the same arguments, and nothing else.
type sqlitePlain struct {
	db      *sql.DB
	hash    []byte
	payload string
}

// sqliteToken is the baseline's lease token: as long as the store's (32 hex
// digits), so that both databases hold rows of the same size.
func sqliteToken(i int) string { return fmt.Sprintf("%032x", uint64(i)) }

func (p *sqlitePlain) insert(ctx context.Context, k idem.Key, token string) (int64, error) {
	now := time.Now().UnixMicro()
	res, err := p.db.ExecContext(ctx, sqliteInsert, string(k.Namespace()), k.Scope(), k.Value(), p.hash, p.payload, token,
		now, now+time.Hour.Microseconds(), now+time.Minute.Microseconds())
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (p *sqlitePlain) beginCommit(ctx context.Context, k idem.Key, token string) error {
	if n, err := p.insert(ctx, k, token); err != nil || n != 1 {
		return fmt.Errorf("baseline insert: %d rows, %v", n, err)
	}
	res, err := p.db.ExecContext(ctx, sqliteCommit, string(k.Namespace()), k.Scope(), k.Value(),
		token, int64(1), time.Now().UnixMicro(), string(benchResult))
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("baseline commit: %d rows, %v", n, err)
	}
	return nil
}

func (p *sqlitePlain) replay(ctx context.Context, k idem.Key) error {
	if n, err := p.insert(ctx, k, sqliteToken(-1)); err != nil || n != 0 {
		return fmt.Errorf("baseline insert on a committed key: %d rows, %v", n, err)
	}
	var (
		status                    string
		hash, req, result, errRaw []byte
		fence, created, expires   int64
		lease                     sql.NullInt64
	)
	err := p.db.QueryRowContext(ctx, sqliteRead, string(k.Namespace()), k.Scope(), k.Value()).
		Scan(&status, &hash, &req, &result, &errRaw, &fence, &created, &expires, &lease)
	if err != nil || status != "committed" {
		return fmt.Errorf("baseline read: %q, %v", status, err)
	}
	return nil
}

// sqliteInterleave runs own and base over [0, b.N) in alternating blocks of
// block operations (see the comment at the top), times own with b's timer and base on the
// side, and reports the ratios. Call it instead of a loop; it resets the
// timer first.
func sqliteInterleave(b *testing.B, block int, own, base func(from, to int)) {
	b.Helper()
	var baseTime time.Duration
	runBase := func(from, to int) {
		start := time.Now()
		base(from, to)
		baseTime += time.Since(start)
	}
	b.ResetTimer()
	b.StopTimer()
	for from, turn := 0, 0; from < b.N; from, turn = from+block, turn+1 {
		to := min(from+block, b.N)
		if turn%2 == 1 {
			runBase(from, to)
		}
		b.StartTimer()
		own(from, to)
		b.StopTimer()
		if turn%2 == 0 {
			runBase(from, to)
		}
	}
	if own := b.Elapsed(); own > 0 && baseTime > 0 {
		b.ReportMetric(float64(own)/float64(baseTime), "x-baseline")
		b.ReportMetric(float64(baseTime)/float64(own), "throughput-ratio")
		b.ReportMetric(float64(baseTime.Nanoseconds())/float64(b.N), "baseline-ns/op")
	}
}

// BenchmarkSQLiteStoreBeginCommit: a fresh key begun and committed, per op,
// on one connection.
func BenchmarkSQLiteStoreBeginCommit(b *testing.B) {
	for _, sync := range sqliteSync {
		b.Run("sync="+sync, func(b *testing.B) {
			s, p := sqlitePair(b, sync, 1, false)
			ks := sqliteKeys(b, b.N)
			ctx := context.Background()
			b.ReportAllocs()
			sqliteInterleave(b, 4, func(from, to int) {
				for i := from; i < to; i++ {
					o, err := s.Begin(ctx, ks[i], benchReq, nil)
					if err != nil || o.Kind != idem.Fresh {
						b.Fatal(o.Kind, err)
					}
					if err := s.Commit(ctx, ks[i], o.Lease, benchResult); err != nil {
						b.Fatal(err)
					}
				}
			}, func(from, to int) {
				for i := from; i < to; i++ {
					if err := p.beginCommit(ctx, ks[i], sqliteToken(i)); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// BenchmarkSQLiteStoreReplay: Begin on a committed key, per op.
func BenchmarkSQLiteStoreReplay(b *testing.B) {
	const committed = 1024
	s, p := sqlitePair(b, "FULL", 1, false)
	ks := sqliteKeys(b, committed)
	ctx := context.Background()
	for i, k := range ks {
		o, err := s.Begin(ctx, k, benchReq, nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Commit(ctx, k, o.Lease, benchResult); err != nil {
			b.Fatal(err)
		}
		if err := p.beginCommit(ctx, k, sqliteToken(i)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	sqliteInterleave(b, 4, func(from, to int) {
		for i := from; i < to; i++ {
			o, err := s.Begin(ctx, ks[i%committed], benchReq, nil)
			if err != nil || o.Kind != idem.PriorResult {
				b.Fatal(o.Kind, err)
			}
		}
	}, func(from, to int) {
		for i := from; i < to; i++ {
			if err := p.replay(ctx, ks[i%committed]); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkSQLiteStoreBeginCommitParallel: Begin+Commit of fresh keys from
// 16 goroutines, on one connection (the lease-mode advice) and on a pool of
// four, each against the baseline on the same pool size, and with
// Config.Batch on one connection. Compare ns/op across the variants for
// the advice, x-baseline for the overhead (with Batch, the store's gain
// over statements each in their own transaction).
func BenchmarkSQLiteStoreBeginCommitParallel(b *testing.B) {
	const goroutines = 16
	for _, v := range []struct {
		conns int
		batch bool
	}{{1, false}, {4, false}, {1, true}} {
		name := "conns=" + strconv.Itoa(v.conns)
		if v.batch {
			name += "/batch"
		}
		b.Run(name, func(b *testing.B) {
			conns := v.conns
			s, p := sqlitePair(b, "FULL", conns, v.batch)
			ks := sqliteKeys(b, b.N)
			ctx := context.Background()
			var failed atomic.Value
			b.ReportAllocs()
			sqliteInterleave(b, 64, func(from, to int) {
				sqliteParallel(from, to, goroutines, func(i int) {
					o, err := s.Begin(ctx, ks[i], benchReq, nil)
					if err == nil && o.Kind != idem.Fresh {
						err = fmt.Errorf("Begin = %s", o.Kind)
					}
					if err == nil {
						err = s.Commit(ctx, ks[i], o.Lease, benchResult)
					}
					if err != nil {
						failed.Store(err)
					}
				})
			}, func(from, to int) {
				sqliteParallel(from, to, goroutines, func(i int) {
					if err := p.beginCommit(ctx, ks[i], sqliteToken(i)); err != nil {
						failed.Store(err)
					}
				})
			})
			if err := failed.Load(); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// sqliteParallel calls body(i) for every i in [from, to) on g goroutines
// that take indices from a shared counter.
func sqliteParallel(from, to, g int, body func(i int)) {
	var next atomic.Int64
	next.Store(int64(from))
	var wg sync.WaitGroup
	for range g {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= to {
					return
				}
				body(i)
			}
		})
	}
	wg.Wait()
}
