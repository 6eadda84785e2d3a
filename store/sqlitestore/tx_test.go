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
