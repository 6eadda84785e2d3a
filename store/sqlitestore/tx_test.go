package sqlitestore_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
)

// dsnDeferred is dsnParams without _txlock=immediate: BeginTx starts a
// deferred transaction, so a second transaction waits inside the store's
// Begin rather than in BeginTx.
const dsnDeferred = "?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)"

// TestTxSecondBeginWaitsForFirst pins the single-writer semantics of
// transactional mode: a second transaction's Begin of the same key waits
// for the first transaction to end, then answers from what it left.
func TestTxSecondBeginWaitsForFirst(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		settle bool // Commit the record in tx1 before ending it
		commit bool // commit tx1 (else roll it back)
		want   idem.Kind
	}{
		{"RolledBack", true, false, idem.Fresh},
		{"CommittedSettled", true, true, idem.PriorResult},
		{"CommittedUnsettled", false, true, idem.InFlight},
	} {
		for _, dsn := range []struct{ name, params string }{{"Immediate", dsnParams}, {"Deferred", dsnDeferred}} {
			t.Run(tc.name+"/"+dsn.name, func(t *testing.T) {
				t.Parallel()
				db := openDB(t, filepath.Join(t.TempDir(), "idem.db"), dsn.params, 4)
				migrate(t, db)
				clock := idemtest.NewClock()
				s := newStore(t, db, clock.Now)
				k := mustKey(t, idemtest.RandomNamespace(t), "k")
				r := mustRequest(t, `{"a":1}`)
				ctx := context.Background()

				tx1, err := db.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = tx1.Rollback() }()
				o1 := mustBegin(t, s.WithTx(tx1), k, r, idem.Fresh)
				if tc.settle {
					if err := s.WithTx(tx1).Commit(ctx, k, o1.Lease, []byte(`"one"`)); err != nil {
						t.Fatal(err)
					}
				}

				type answer struct {
					o   idem.Outcome
					err error
				}
				started, done := make(chan struct{}), make(chan answer, 1)
				go func() {
					close(started)
					tx2, err := db.BeginTx(ctx, nil)
					if err != nil {
						done <- answer{err: err}
						return
					}
					defer func() { _ = tx2.Rollback() }()
					o, err := s.WithTx(tx2).Begin(ctx, k, r, nil)
					done <- answer{o, err}
				}()
				<-started
				// Give tx2 time to reach the lock; the outcome below is
				// the same whether or not it got there first.
				time.Sleep(50 * time.Millisecond)
				select {
				case a := <-done:
					t.Fatalf("second Begin answered %s, %v while the first transaction was open", a.o.Kind, a.err)
				default:
				}
				end := tx1.Rollback
				if tc.commit {
					end = tx1.Commit
				}
				if err := end(); err != nil {
					t.Fatal(err)
				}
				a := <-done
				if a.err != nil || a.o.Kind != tc.want {
					t.Fatalf("second Begin = %s, %v; want %s", a.o.Kind, a.err, tc.want)
				}
			})
		}
	}
}

// TestTxBusyTimeout: a Begin that waits for the write lock longer than
// busy_timeout fails with ErrUnavailable, one whose ctx ends first fails
// with the ctx's error; neither writes anything.
func TestTxBusyTimeout(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "idem.db")
	db := openDB(t, path, dsnParams, 2)
	migrate(t, db)
	short := openDB(t, path, "?_pragma=busy_timeout(100)&_pragma=journal_mode(WAL)", 2)
	k := mustKey(t, idemtest.RandomNamespace(t), "k")
	r := mustRequest(t, `{"a":1}`)

	tx, err := db.BeginTx(context.Background(), nil) // immediate: holds the write lock
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()

	for _, tc := range []struct {
		name    string
		db      *sql.DB
		timeout time.Duration
		want    error
	}{
		{"BusyTimeout", short, time.Minute, idem.ErrUnavailable},
		{"ContextDeadline", db, 100 * time.Millisecond, context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), tc.timeout)
			defer cancel()
			start := time.Now()
			_, err := newStore(t, tc.db, nil).Begin(ctx, k, r, nil)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Begin while another transaction writes: %v, want %v", err, tc.want)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("Begin took %v", d)
			}
		})
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if _, err := newStore(t, db, nil).Get(context.Background(), k); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("failed Begins left a record: %v", err)
	}
}

// A deferred transaction that has read cannot wait for the write lock:
// SQLite does not call the busy handler to upgrade it, so its Begin fails
// at once with ErrUnavailable while another connection merely holds the
// lock, though nothing was written since the read. Begun with
// _txlock=immediate, the same transaction waits and gets Fresh.
func TestTxReadFirstDoesNotWaitForTheWriteLock(t *testing.T) {
	t.Parallel()
	for _, dsn := range []struct {
		name, params string
		wait         bool
	}{{"Deferred", dsnDeferred, false}, {"Immediate", dsnParams, true}} {
		t.Run(dsn.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "idem.db")
			db := openDB(t, path, dsn.params, 2)
			migrate(t, db)
			holder := openDB(t, path, dsnParams, 1)
			s := newStore(t, db, nil)
			k := mustKey(t, idemtest.RandomNamespace(t), "k")
			r := mustRequest(t, `{"a":1}`)
			ctx := context.Background()

			lock, err := holder.BeginTx(ctx, nil) // immediate: holds the write lock
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = lock.Rollback() }()
			type answer struct {
				o   idem.Outcome
				err error
			}
			done := make(chan answer, 1)
			go func() {
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					done <- answer{err: err}
					return
				}
				defer func() { _ = tx.Rollback() }()
				if _, err := s.WithTx(tx).Get(ctx, k); !errors.Is(err, idem.ErrNotFound) {
					done <- answer{err: err}
					return
				}
				o, err := s.WithTx(tx).Begin(ctx, k, r, nil)
				done <- answer{o, err}
			}()
			if !dsn.wait {
				a := <-done
				if !errors.Is(a.err, idem.ErrUnavailable) {
					t.Fatalf("Begin after a read while another connection holds the write lock = %s, %v; want ErrUnavailable at once", a.o.Kind, a.err)
				}
				return
			}
			// The transaction waits for the lock in BeginTx, before it
			// reads: nothing answers while the lock is held.
			select {
			case a := <-done:
				t.Fatalf("Begin answered %s, %v while another connection held the write lock", a.o.Kind, a.err)
			case <-time.After(50 * time.Millisecond):
			}
			if err := lock.Rollback(); err != nil {
				t.Fatal(err)
			}
			if a := <-done; a.err != nil || a.o.Kind != idem.Fresh {
				t.Fatalf("Begin = %s, %v; want Fresh", a.o.Kind, a.err)
			}
		})
	}
}
