package sqlitestore_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/store/sqlitestore"
)

// Another process (here another *sql.DB on the same file) holds SQLite's
// write lock in a transaction it does not end for longer than the busy
// timeout. Every Begin, batched or not, returns with a typed error (its
// context's when that ends first, else ErrUnavailable) and writes nothing;
// once the lock is released, the store serves again: the same keys are
// Fresh, and the batcher, whose transaction failed to start, runs later
// calls.
func TestBeginRecoversWhenAnotherProcessReleasesTheWriteLock(t *testing.T) {
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprint("Batch=", batch), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "idem.db")
			params := "?_pragma=busy_timeout(300)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_txlock=immediate"
			db := openDB(t, path, params, 1)
			migrate(t, db)
			s, err := sqlitestore.New(db, sqlitestore.Config{Batch: batch})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			other, err := openDB(t, path, params, 1).Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = other.Close() }()
			if _, err := other.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
				t.Fatal(err)
			}

			ns := idem.MustNamespace("held")
			req := mustRequest(t, `{}`)
			const callers = 6
			var wg sync.WaitGroup
			for i := range callers {
				wg.Go(func() {
					callCtx := ctx
					want := idem.ErrUnavailable
					if i%2 == 0 { // half give up before the busy timeout
						var cancel context.CancelFunc
						callCtx, cancel = context.WithTimeout(ctx, 100*time.Millisecond)
						defer cancel()
						want = context.DeadlineExceeded
					}
					if _, err := s.Begin(callCtx, mustKey(t, ns, fmt.Sprint("k", i)), req, nil); !errors.Is(err, want) {
						t.Errorf("Begin %d while the lock is held: %v; want %v", i, err, want)
					}
				})
			}
			wg.Wait()
			for i := range callers { // reads need no write lock (WAL)
				if _, err := s.Get(ctx, mustKey(t, ns, fmt.Sprint("k", i))); !errors.Is(err, idem.ErrNotFound) {
					t.Errorf("Get k%d after its Begin failed: %v; want ErrNotFound", i, err)
				}
			}

			if _, err := other.ExecContext(ctx, "ROLLBACK"); err != nil {
				t.Fatal(err)
			}
			for i := range callers {
				wg.Go(func() {
					k := mustKey(t, ns, fmt.Sprint("k", i))
					o, err := s.Begin(ctx, k, req, nil)
					if err != nil || o.Kind != idem.Fresh {
						t.Errorf("Begin %d after the lock was released: %v, %v; want Fresh", i, o.Kind, err)
						return
					}
					if err := s.Commit(ctx, k, o.Lease, []byte(`1`)); err != nil {
						t.Errorf("Commit %d: %v", i, err)
					}
				})
			}
			wg.Wait()
		})
	}
}

// A *sql.DB closed while batched calls are queued and running: every call
// returns, each either done (its record written) or with ErrUnavailable
// (nothing written), no call panics, and calls after the close fail with
// ErrUnavailable at once. TestMain's goleak check finds no batcher
// goroutine left behind.
func TestBatchCallsAcrossClose(t *testing.T) {
	db, path := newDB(t, 1)
	s := newStoreBatch(t, db, nil, true)
	ns := idem.MustNamespace("close")
	req := mustRequest(t, `{}`)
	const callers = 200
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			_, errs[i] = s.Begin(context.Background(), mustKey(t, ns, fmt.Sprint("k", i)), req, nil)
		})
		if i == callers/2 {
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	wg.Wait()
	if _, err := s.Begin(context.Background(), mustKey(t, ns, "after"), req, nil); !errors.Is(err, idem.ErrUnavailable) {
		t.Errorf("Begin after Close: %v; want ErrUnavailable", err)
	}

	reopened := newStore(t, openDB(t, path, dsnParams, 1), nil)
	for i, err := range errs {
		_, getErr := reopened.Get(context.Background(), mustKey(t, ns, fmt.Sprint("k", i)))
		switch {
		case err == nil && getErr != nil:
			t.Errorf("k%d: Begin succeeded, but its record: %v", i, getErr)
		case err != nil && !errors.Is(err, idem.ErrUnavailable):
			t.Errorf("k%d: Begin across Close: %v; want nil or ErrUnavailable", i, err)
		case err != nil && !errors.Is(getErr, idem.ErrNotFound):
			t.Errorf("k%d: Begin failed (%v), but Get: %v; want ErrNotFound", i, err, getErr)
		}
	}
}
