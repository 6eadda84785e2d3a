package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/idemgo/idem"
)

// TestBatchCallsShareATransaction holds the batcher busy while three calls
// queue, then checks that they ran in one transaction, and that the one
// that failed after writing was rolled back alone.
func TestBatchCallsShareATransaction(t *testing.T) {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "b.db")+
		"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, "CREATE TABLE t (k INTEGER)"); err != nil {
		t.Fatal(err)
	}
	b := &batcher{db: db, max: maxBatch}

	release := make(chan struct{})
	blocked := make(chan error, 1)
	go func() {
		blocked <- b.do(ctx, func(context.Context, querier) error { <-release; return nil })
	}()
	waitBatcher(t, b, func() bool { return b.busy })

	failed := errors.New("failed after writing")
	var mu sync.Mutex
	seen := map[querier]int{}
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range 3 {
		wg.Go(func() {
			errs[i] = b.do(ctx, func(ctx context.Context, q querier) error {
				mu.Lock()
				seen[q]++
				mu.Unlock()
				if _, err := q.ExecContext(ctx, "INSERT INTO t VALUES (?)", i); err != nil {
					return err
				}
				if i == 1 {
					return failed
				}
				return nil
			})
		})
	}
	waitBatcher(t, b, func() bool { return len(b.queue) == 3 })
	close(release)
	wg.Wait()
	if err := <-blocked; err != nil {
		t.Fatal(err)
	}
	if errs[0] != nil || !errors.Is(errs[1], failed) || errs[2] != nil {
		t.Errorf("errors %v, want nil, the call's own, nil", errs)
	}
	if len(seen) != 1 {
		t.Errorf("the three calls ran on %d queriers, want one transaction", len(seen))
	}
	var sum, n int
	if err := db.QueryRowContext(ctx, "SELECT count(*), coalesce(sum(k), 0) FROM t").Scan(&n, &sum); err != nil {
		t.Fatal(err)
	}
	if n != 2 || sum != 2 {
		t.Errorf("%d rows summing to %d, want the rows of calls 0 and 2 only", n, sum)
	}
	waitBatcher(t, b, func() bool { return !b.busy })
}

// TestBatchAbandonedCallNeverRuns: a call whose context ends while it waits
// returns at once, and never runs.
func TestBatchAbandonedCallNeverRuns(t *testing.T) {
	b := &batcher{max: maxBatch} // no database: nothing may reach it
	release := make(chan struct{})
	blocked := make(chan error, 1)
	go func() {
		blocked <- b.do(context.Background(), func(context.Context, querier) error { <-release; return nil })
	}()
	waitBatcher(t, b, func() bool { return b.busy })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err := b.do(ctx, func(context.Context, querier) error {
		t.Error("the abandoned call ran")
		return nil
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("do = %v, want the context's deadline", err)
	}
	close(release)
	if err := <-blocked; err != nil {
		t.Fatal(err)
	}
	waitBatcher(t, b, func() bool { return !b.busy && len(b.queue) == 0 })
}

// waitBatcher waits until cond, called with b.mu held, holds, or fails t
// after five seconds.
func waitBatcher(t *testing.T, b *batcher, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		b.mu.Lock()
		ok := cond()
		b.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the batcher did not get there in 5s")
		}
	}
}

// TestBatchPanicIsTheCallersAlone: a call that panics in a batch panics in
// its caller's goroutine, as it would without Batch, where the caller may
// recover it; the batcher's goroutine goes on, the call's savepoint is
// rolled back, and the other calls of its batch are committed and told so.
func TestBatchPanicIsTheCallersAlone(t *testing.T) {
	db, errs, recovered := threeInOneBatch(t, "&_txlock=immediate", "CREATE TABLE t (k INTEGER)",
		func(ctx context.Context, q querier, i int) error {
			if _, err := q.ExecContext(ctx, "INSERT INTO t VALUES (?)", i); err != nil {
				return err
			}
			if i == 1 {
				panic("call 1 panics")
			}
			return nil
		})
	if errs[0] != nil || errs[2] != nil || recovered[0] != nil || recovered[2] != nil {
		t.Errorf("calls 0 and 2: errors %v, %v, panics %v, %v; want success", errs[0], errs[2], recovered[0], recovered[2])
	}
	if p, ok := recovered[1].(*batchPanic); !ok || p.value != "call 1 panics" {
		t.Errorf("call 1 panicked with %#v, want its own panic", recovered[1])
	}
	var sum, n int
	if err := db.QueryRowContext(context.Background(), "SELECT count(*), coalesce(sum(k), 0) FROM t").Scan(&n, &sum); err != nil {
		t.Fatal(err)
	}
	if n != 2 || sum != 2 {
		t.Errorf("%d rows summing to %d, want the rows of calls 0 and 2 only", n, sum)
	}
}

// TestBatchEndedByAFailingCall: when a call fails in a way that makes
// SQLite end the whole transaction (a full database here), the other calls
// of its batch, whose writes went with it, are told why, the failing
// call's error in their chain, not that a savepoint of the store's own is
// missing.
func TestBatchEndedByAFailingCall(t *testing.T) {
	db, errs, _ := threeInOneBatch(t, "&_pragma=max_page_count(20)", "CREATE TABLE t (k INTEGER, v BLOB)",
		func(ctx context.Context, q querier, i int) error {
			size := 10
			if i == 1 {
				size = 1 << 20 // more than the 20 pages the database may have
			}
			_, err := q.ExecContext(ctx, "INSERT INTO t VALUES (?, zeroblob(?))", i, size)
			return err
		})
	var sqliteErr *sqlite.Error
	if !errors.As(errs[1], &sqliteErr) || sqliteErr.Code() != sqlite3.SQLITE_FULL {
		t.Fatalf("call 1: %v, want SQLITE_FULL", errs[1])
	}
	for _, i := range []int{0, 2} {
		if !errors.Is(errs[i], idem.ErrUnavailable) || !errors.As(errs[i], &sqliteErr) || sqliteErr.Code() != sqlite3.SQLITE_FULL {
			t.Errorf("call %d: %v, want ErrUnavailable with call 1's SQLITE_FULL in its chain", i, errs[i])
		}
	}
	var n int
	if err := db.QueryRowContext(context.Background(), "SELECT count(*) FROM t").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d rows, want none: the batch's transaction ended", n)
	}
}

// threeInOneBatch opens a database (WAL, with the DSN parameters params
// added), runs schema, and has a batcher on it run call(i) for i = 0, 1,
// 2 in one batch, queued while a call before them holds the batcher. It
// returns the database, each call's error, and what each call's panic, if
// any, was recovered as in its caller's goroutine.
func threeInOneBatch(t *testing.T, params, schema string, call func(ctx context.Context, q querier, i int) error) (*sql.DB, []error, []any) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "b.db")+
		"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)"+params)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, schema); err != nil {
		t.Fatal(err)
	}
	b := &batcher{db: db, max: maxBatch}

	release := make(chan struct{})
	blocked := make(chan error, 1)
	go func() {
		blocked <- b.do(ctx, func(context.Context, querier) error { <-release; return nil })
	}()
	waitBatcher(t, b, func() bool { return b.busy })

	var wg sync.WaitGroup
	errs := make([]error, 3)
	recovered := make([]any, 3)
	for i := range 3 {
		wg.Go(func() {
			defer func() { recovered[i] = recover() }()
			errs[i] = b.do(ctx, func(ctx context.Context, q querier) error { return call(ctx, q, i) })
		})
	}
	waitBatcher(t, b, func() bool { return len(b.queue) == 3 })
	close(release)
	wg.Wait()
	if err := <-blocked; err != nil {
		t.Fatal(err)
	}
	waitBatcher(t, b, func() bool { return !b.busy })
	return db, errs, recovered
}

// TestBatchPreparesEachStatementOnce: the calls of a batch run on
// statements prepared once for the batch (the same prepared statement for
// the same text, with each call's own arguments), and a statement that
// cannot be prepared (no such table) fails its call alone, with SQLite's
// error, as it would unprepared.
func TestBatchPreparesEachStatementOnce(t *testing.T) {
	const insert = "INSERT INTO t VALUES (?)"
	stmts := make([]*sql.Stmt, 3)
	db, errs, recovered := threeInOneBatch(t, "", "CREATE TABLE t (k INTEGER)",
		func(ctx context.Context, q querier, i int) error {
			bc, ok := q.(*batchConn)
			if !ok {
				return fmt.Errorf("a batch's querier is a %T", q)
			}
			if _, err := q.ExecContext(ctx, insert, 10+i); err != nil {
				return err
			}
			stmts[i] = bc.stmts[insert]
			var n int
			if err := q.QueryRowContext(ctx, "SELECT count(*) FROM t WHERE k = ?", 10+i).Scan(&n); err != nil || n != 1 {
				return fmt.Errorf("own row counted %d times: %v", n, err)
			}
			if i == 1 {
				_, err := q.ExecContext(ctx, "INSERT INTO missing VALUES (?)", i)
				return err
			}
			return nil
		})
	if errs[0] != nil || errs[2] != nil || recovered[0] != nil || recovered[2] != nil {
		t.Fatalf("calls 0 and 2: errors %v, %v, panics %v, %v; want success", errs[0], errs[2], recovered[0], recovered[2])
	}
	if errs[1] == nil || !strings.Contains(errs[1].Error(), "no such table: missing") {
		t.Errorf("call 1: %v, want SQLite's no such table", errs[1])
	}
	if stmts[0] == nil || stmts[1] != stmts[0] || stmts[2] != stmts[0] {
		t.Errorf("the calls ran the insert on statements %p, %p, %p: want one, prepared for the batch", stmts[0], stmts[1], stmts[2])
	}
	var n, sum int
	if err := db.QueryRowContext(context.Background(), "SELECT count(*), coalesce(sum(k), 0) FROM t").Scan(&n, &sum); err != nil {
		t.Fatal(err)
	}
	if n != 2 || sum != 22 {
		t.Errorf("%d rows summing to %d, want the rows of calls 0 and 2 only", n, sum)
	}
}
