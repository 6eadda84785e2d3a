package pgstore_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
	"github.com/idemgo/idem/store/pgstore"
)

// txRunner runs fn in a new transaction of one of the two drivers and
// commits it when fn returns true, rolls it back otherwise.
type txRunner func(ctx context.Context, fn func(s idem.Store, exec func(sql string, args ...any) error) bool) error

func pgxRunner(tb *testBundle) txRunner {
	return func(ctx context.Context, fn func(idem.Store, func(string, ...any) error) bool) error {
		tx, err := tb.pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback(ctx) }()
		exec := func(q string, args ...any) error { _, err := tx.Exec(ctx, q, args...); return err }
		if !fn(tb.store.WithTx(tx), exec) {
			return tx.Rollback(ctx)
		}
		return tx.Commit(ctx)
	}
}

func sqlRunner(t *testing.T, tb *testBundle) txRunner {
	db := stdlib.OpenDBFromPool(tb.pool)
	t.Cleanup(func() { _ = db.Close() })
	return func(ctx context.Context, fn func(idem.Store, func(string, ...any) error) bool) error {
		tx, err := db.BeginTx(ctx, &sql.TxOptions{})
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback() }()
		exec := func(q string, args ...any) error { _, err := tx.ExecContext(ctx, q, args...); return err }
		if !fn(tb.store.WithSQLTx(tx), exec) {
			return tx.Rollback()
		}
		return tx.Commit()
	}
}

// TestTxExactlyOnce: 50 goroutines each run "Begin, insert a business row,
// Commit" for one key in their own transactions, retrying on InFlight
// until they get Fresh or PriorResult. Exactly one business row exists
// afterwards, written by the only Fresh.
func TestTxExactlyOnce(t *testing.T) {
	for _, driver := range []string{"pgx", "database/sql"} {
		t.Run(driver, func(t *testing.T) {
			tb := setup(t, pgstore.Config{})
			run := pgxRunner(tb)
			if driver == "database/sql" {
				run = sqlRunner(t, tb)
			}
			ctx := ctxT(t)
			if _, err := tb.pool.Exec(ctx, `CREATE TABLE orders (id bigserial PRIMARY KEY, note text NOT NULL)`); err != nil {
				t.Fatal(err)
			}
			key := mustKey(t, idemtest.RandomNamespace(t), "order-1")
			req := mustRequest(t, `{"amount":100}`)

			const n = 50
			var fresh, prior, inflight atomic.Int64
			var wg sync.WaitGroup
			start := make(chan struct{})
			errs := make(chan error, n)
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					for done := false; !done; {
						err := run(ctx, func(s idem.Store, exec func(string, ...any) error) bool {
							o, err := s.Begin(ctx, key, req, nil)
							if err != nil {
								errs <- err
								done = true
								return false
							}
							switch o.Kind {
							case idem.Fresh:
								fresh.Add(1)
								if err := exec(`INSERT INTO orders (note) VALUES ($1)`, "by worker"); err != nil {
									errs <- err
									done = true
									return false
								}
								if err := s.Commit(ctx, key, o.Lease, []byte(`{"order":1}`)); err != nil {
									errs <- err
									done = true
									return false
								}
								done = true
								return true
							case idem.PriorResult:
								prior.Add(1)
								done = true
							case idem.InFlight:
								inflight.Add(1)
							default:
								errs <- errors.New("unexpected outcome " + o.Kind.String())
								done = true
							}
							return false
						})
						if err != nil {
							errs <- err
							return
						}
						if !done {
							time.Sleep(time.Duration(1+i%5) * time.Millisecond)
						}
					}
				}()
			}
			close(start)
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			var rows int
			if err := tb.pool.QueryRow(ctx, `SELECT count(*) FROM orders`).Scan(&rows); err != nil {
				t.Fatal(err)
			}
			if rows != 1 || fresh.Load() != 1 || prior.Load() != n-1 {
				t.Fatalf("business rows = %d, fresh = %d, prior results = %d (in flight %d), want 1, 1, %d",
					rows, fresh.Load(), prior.Load(), inflight.Load(), n-1)
			}
			t.Logf("in-flight answers while the owner's transaction was open: %d", inflight.Load())
		})
	}
}

// TestTxDoesNotBlockOthers: while a transaction holds an uncommitted
// reservation, Begins of the same key from another transaction and from
// lease mode answer InFlight at once; a transaction that only read the
// record (a replay) blocks nobody; and a lease-mode reservation settled
// inside a transaction keeps other Begins from waiting on its row lock.
func TestTxDoesNotBlockOthers(t *testing.T) {
	tb := setup(t, pgstore.Config{})
	ns := idemtest.RandomNamespace(t)
	req := mustRequest(t, `{"a":1}`)
	quick := func() context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		t.Cleanup(cancel)
		return ctx
	}
	begin := func(s idem.Store, k idem.Key) idem.Outcome {
		t.Helper()
		o, err := s.Begin(quick(), k, req, nil)
		if err != nil {
			t.Fatalf("Begin: %v", err)
		}
		return o
	}
	ctx := ctxT(t)

	t.Run("UncommittedReservation", func(t *testing.T) {
		k := mustKey(t, ns, "open-tx")
		tx1, err := tb.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx1.Rollback(ctx) }()
		wantOutcome(t, begin(tb.store.WithTx(tx1), k), idem.Fresh)
		tx2, err := tb.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx2.Rollback(ctx) }()
		wantOutcome(t, begin(tb.store.WithTx(tx2), k), idem.InFlight)
		o := begin(tb.store, k)
		wantOutcome(t, o, idem.InFlight)
		if o.RetryAfter != idem.DefaultLease {
			t.Errorf("RetryAfter = %v, want the store's lease %v", o.RetryAfter, idem.DefaultLease)
		}
		// Another request with the same key, while nothing is committed:
		// nothing to compare with yet, so InFlight as well.
		wantOutcome(t, begin(tb.store.WithTx(tx2), k), idem.InFlight)
	})

	t.Run("ReadersHoldNoLock", func(t *testing.T) {
		k := mustKey(t, ns, "replayed")
		o := begin(tb.store, k)
		if err := tb.store.Commit(ctx, k, o.Lease, []byte(`1`)); err != nil {
			t.Fatal(err)
		}
		tx1, err := tb.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx1.Rollback(ctx) }()
		wantOutcome(t, begin(tb.store.WithTx(tx1), k), idem.PriorResult)
		tx2, err := tb.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx2.Rollback(ctx) }()
		wantOutcome(t, begin(tb.store.WithTx(tx2), k), idem.PriorResult)
		wantOutcome(t, begin(tb.store, k), idem.PriorResult)
	})

	t.Run("LeaseSettledInTransaction", func(t *testing.T) {
		k := mustKey(t, ns, "settled-in-tx")
		o := begin(tb.store, k)
		tx1, err := tb.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx1.Rollback(ctx) }()
		if err := tb.store.WithTx(tx1).Commit(quick(), k, o.Lease, []byte(`"in tx"`)); err != nil {
			t.Fatal(err)
		}
		// The row is locked by tx1 until it ends; other Begins answer from
		// what is committed (an in-flight reservation) without waiting.
		tx2, err := tb.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx2.Rollback(ctx) }()
		wantOutcome(t, begin(tb.store.WithTx(tx2), k), idem.InFlight)
		wantOutcome(t, begin(tb.store, k), idem.InFlight)
		if err := tx1.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		wantOutcome(t, begin(tb.store, k), idem.PriorResult)
	})
}

// TestTxSettleWaitsForContext: a transactional settle call waits for the
// key's lock held by another transaction settling the same key, and ctx
// bounds the wait.
func TestTxSettleWaitsForContext(t *testing.T) {
	tb := setup(t, pgstore.Config{})
	ctx := ctxT(t)
	k := mustKey(t, idemtest.RandomNamespace(t), "held")
	o, err := tb.store.Begin(ctx, k, mustRequest(t, `{}`), nil)
	if err != nil || o.Kind != idem.Fresh {
		t.Fatalf("Begin = %v, %v", o.Kind, err)
	}
	tx1, err := tb.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx1.Rollback(ctx) }()
	if _, err := tb.store.WithTx(tx1).Heartbeat(ctx, k, o.Lease, 0); err != nil {
		t.Fatal(err)
	}
	tx2, err := tb.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx2.Rollback(ctx) }()
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	err = tb.store.WithTx(tx2).Commit(short, k, o.Lease, []byte(`1`))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Commit while another transaction settles the key: %v, want context.DeadlineExceeded", err)
	}
	if errors.Is(err, idem.ErrUnavailable) {
		t.Errorf("a context error is reported as ErrUnavailable: %v", err)
	}
	// Once tx1 ends, the lease is still good.
	if err := tx1.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := tb.store.Commit(ctx, k, o.Lease, []byte(`2`)); err != nil {
		t.Fatalf("Commit after the other transaction ended: %v", err)
	}
}

// TestTxBound: the transaction-bound stores say so (idem.TxBound), the
// lease-mode Store does not.
func TestTxBound(t *testing.T) {
	tb := setup(t, pgstore.Config{})
	ctx := ctxT(t)
	if b, ok := idem.Store(tb.store).(idem.TxBound); ok && b.TxBound() {
		t.Error("the lease-mode Store reports TxBound")
	}
	tx, err := tb.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	db := stdlib.OpenDBFromPool(tb.pool)
	defer func() { _ = db.Close() }()
	stx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stx.Rollback() }()
	for name, s := range map[string]idem.Store{"WithTx": tb.store.WithTx(tx), "WithSQLTx": tb.store.WithSQLTx(stx)} {
		if b, ok := s.(idem.TxBound); !ok || !b.TxBound() {
			t.Errorf("%s: not TxBound", name)
		}
	}
}
