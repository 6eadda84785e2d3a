package sqlitestore_test

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
)

// Begin reads the clock once it holds SQLite's write lock, not before it
// waits for it: a Begin that waited while the clock moved grants a full
// lease from the time it got the lock, and judges the record it finds at
// that time (a lease or a retention that ran out during the wait has run
// out).
func TestBeginReadsTheClockWhenItHoldsTheWriteLock(t *testing.T) {
	t.Parallel()
	const wait = idemtest.Lease + time.Second // how far the clock moves while Begin waits
	for _, tc := range []struct {
		name     string
		setup    func(t *testing.T, s idem.Store, k idem.Key, r idem.Request)
		takeover bool
	}{
		{name: "NoRecord", setup: func(*testing.T, idem.Store, idem.Key, idem.Request) {}},
		{name: "LeaseLapsesDuringWait", takeover: true, setup: func(t *testing.T, s idem.Store, k idem.Key, r idem.Request) {
			mustBegin(t, s, k, r, idem.Fresh)
		}},
		{name: "RecordExpiresDuringWait", setup: func(t *testing.T, s idem.Store, k idem.Key, r idem.Request) {
			o, err := s.Begin(context.Background(), k, r, &idem.BeginOpts{Retention: time.Second, Lease: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Commit(context.Background(), k, o.Lease, []byte(`"done"`)); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		for _, mode := range []string{"Lease", "Batch", "Tx"} {
			t.Run(tc.name+"/"+mode, func(t *testing.T) {
				t.Parallel()
				path := filepath.Join(t.TempDir(), "idem.db")
				params, conns := dsnParams, 1
				if mode == "Tx" {
					// A deferred transaction that has not written yet: the
					// store's Begin is the one to wait for the lock.
					params, conns = dsnDeferred, 2
				}
				db := openDB(t, path, params, conns)
				migrate(t, db)
				holder := openDB(t, path, dsnParams, 1)
				clock := idemtest.NewClock()
				k := mustKey(t, idemtest.RandomNamespace(t), "k")
				r := mustRequest(t, `{"a":1}`)
				ctx := context.Background()
				tc.setup(t, newStore(t, db, clock.Now), k, r)
				var once sync.Once
				read := make(chan struct{}) // closed when the store first reads the clock
				lease := newStoreBatch(t, db, func() time.Time { once.Do(func() { close(read) }); return clock.Now() }, mode == "Batch")
				var s idem.Store = lease
				if mode == "Tx" {
					tx, err := db.BeginTx(ctx, nil)
					if err != nil {
						t.Fatal(err)
					}
					defer func() { _ = tx.Rollback() }()
					s = lease.WithTx(tx)
				}

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
					o, err := s.Begin(ctx, k, r, nil)
					done <- answer{o, err}
				}()
				// Let Begin get as far as it can before the lock, then move
				// the clock. In lease mode it has taken its connection, the
				// pool's only one; in the caller's transaction nothing shows
				// that it waits, so it is given a moment, or until it reads
				// the clock, which would be too early.
				if mode == "Tx" {
					select {
					case <-read:
					case <-time.After(100 * time.Millisecond):
					}
				}
				for db.Stats().InUse == 0 {
					select {
					case a := <-done:
						t.Fatalf("Begin answered %s, %v while another transaction held the write lock", a.o.Kind, a.err)
					case <-time.After(time.Millisecond):
					}
				}
				clock.Advance(wait)
				if err := lock.Rollback(); err != nil {
					t.Fatal(err)
				}
				a := <-done
				if a.err != nil || a.o.Kind != idem.Fresh || a.o.TakenOver != tc.takeover {
					t.Fatalf("Begin = %s (TakenOver %v), %v; want Fresh (TakenOver %v)", a.o.Kind, a.o.TakenOver, a.err, tc.takeover)
				}
				if want := clock.Now().Add(idemtest.Lease); !a.o.Lease.ExpiresAt.Equal(want) {
					t.Errorf("lease expires at %v, want %v: a full lease from the time Begin held the lock", a.o.Lease.ExpiresAt, want)
				}
				rec, err := s.Get(ctx, k)
				if err != nil {
					t.Fatal(err)
				}
				if want := clock.Now(); !rec.CreatedAt.Equal(want) || !rec.ExpiresAt.Equal(want.Add(idemtest.Retention)) {
					t.Errorf("record created at %v, expires at %v; want %v and %v", rec.CreatedAt, rec.ExpiresAt, want, want.Add(idemtest.Retention))
				}
			})
		}
	}
}

// A lease-mode Begin that ends without committing, on a panic of the
// clock here, rolls back the transaction it opened: its connection goes
// back to the pool holding no write lock.
func TestBeginRollsBackItsTransaction(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "idem.db")
	db := openDB(t, path, dsnParams, 1)
	migrate(t, db)
	var panicking atomic.Bool
	panicking.Store(true)
	s := newStore(t, db, func() time.Time {
		if panicking.Load() {
			panic("clock")
		}
		return time.Now()
	})
	k := mustKey(t, idemtest.RandomNamespace(t), "k")
	r := mustRequest(t, `{"a":1}`)
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("Begin did not panic with its clock")
			}
		}()
		_, _ = s.Begin(context.Background(), k, r, nil)
	}()
	other := newStore(t, openDB(t, path, "?_pragma=busy_timeout(100)&_pragma=journal_mode(WAL)", 1), nil)
	mustBegin(t, other, k, r, idem.Fresh)
	panicking.Store(false)
	mustBegin(t, s, k, r, idem.InFlight)
}
