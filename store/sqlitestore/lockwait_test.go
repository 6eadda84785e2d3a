package sqlitestore_test

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

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/store/sqlitestore"
)

// While another transaction holds SQLite's write lock (a WithTx caller's,
// say), a call whose context ends returns at once with that context's
// error, batched or not, instead of waiting out the busy timeout and then
// reporting the store unavailable.
func TestCallsWaitingForTheWriteLockLeaveWithTheirContext(t *testing.T) {
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprint("Batch=", batch), func(t *testing.T) {
			db, _ := newDB(t, 8)
			callsLeaveWithTheirContext(t, db, batch)
		})
	}
}

// With Config.Batch, a batch's transaction takes the write lock when it
// starts whatever the DSN's _txlock says, as a lease-mode Begin's does: on
// a DSN without _txlock=immediate, calls queued behind another
// transaction's lock still leave with their context, instead of being
// taken into a deferred transaction where each waited out the busy timeout
// in turn, unable to leave, and then reported the store unavailable.
func TestBatchTakesTheWriteLockWithoutTxlock(t *testing.T) {
	db := openDB(t, filepath.Join(t.TempDir(), "idem.db"), "?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)", 8)
	migrate(t, db)
	callsLeaveWithTheirContext(t, db, true)
}

// callsLeaveWithTheirContext holds db's write lock in a transaction that
// called Begin, and checks that Begins on a lease-mode store on db, with
// Config.Batch when batch, return with their context's error once it ends.
func callsLeaveWithTheirContext(t *testing.T, db *sql.DB, batch bool) {
	s, err := sqlitestore.New(db, sqlitestore.Config{Batch: batch})
	if err != nil {
		t.Fatal(err)
	}
	ns := idem.MustNamespace("lock")
	req, err := idem.NewRequest([]byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	held, _ := idem.ParseKey(ns, "held")
	if _, err := s.WithTx(tx).Begin(context.Background(), held, req, nil); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 6 {
		time.Sleep(20 * time.Millisecond) // the first runs alone, the others queue behind it
		wg.Go(func() {
			k, _ := idem.ParseKey(ns, fmt.Sprintf("k%d", i))
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, err := s.Begin(ctx, k, req, nil)
			if took := time.Since(start); !errors.Is(err, context.DeadlineExceeded) || took > 3*time.Second {
				t.Errorf("call %d: Begin returned after %v with %v; want its context's deadline error", i, took.Round(time.Millisecond), err)
			}
		})
	}
	wg.Wait()
}

// With Config.Batch, invalid arguments are rejected before any I/O, as
// without it: while another transaction holds the write lock past the
// busy timeout, a call with a bad argument gets its own error at once,
// not a place in the queue behind the lock and then the batch's
// ErrUnavailable.
func TestBatchRejectsInvalidArgumentsWithoutWaiting(t *testing.T) {
	db := openDB(t, filepath.Join(t.TempDir(), "idem.db"), "?_pragma=busy_timeout(2000)&_pragma=journal_mode(WAL)&_txlock=immediate", 8)
	migrate(t, db)
	s, err := sqlitestore.New(db, sqlitestore.Config{Batch: true, MaxPayload: 64})
	if err != nil {
		t.Fatal(err)
	}
	ns := idem.MustNamespace("lock")
	k, _ := idem.ParseKey(ns, "k")
	req, err := idem.NewRequest([]byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := s.WithTx(tx).Begin(ctx, k, req, nil); err != nil {
		t.Fatal(err)
	}
	// A valid call waits for the lock on its own; the others queue.
	blocked := make(chan error, 1)
	go func() {
		_, err := s.Begin(ctx, mustKey(t, ns, "valid"), req, nil)
		blocked <- err
	}()
	time.Sleep(50 * time.Millisecond)

	lease := idem.Lease{Token: "t", Fence: 1}
	var wg sync.WaitGroup
	isErr := func(target error) func(error) bool { return func(err error) bool { return errors.Is(err, target) } }
	for name, c := range map[string]struct {
		call func() error
		ok   func(error) bool
	}{
		"Begin/zero fingerprint": {func() error {
			_, err := s.Begin(ctx, k, idem.Request{}, nil)
			return err
		}, isErr(idem.ErrInvalidFingerprint)},
		"Begin/negative lease": {func() error {
			_, err := s.Begin(ctx, k, req, &idem.BeginOpts{Lease: -1})
			return err
		}, isErr(idem.ErrInvalidOptions)},
		"Commit/not JSON":    {func() error { return s.Commit(ctx, k, lease, []byte(`{`)) }, isErr(idem.ErrInvalidPayload)},
		"Commit/empty token": {func() error { return s.Commit(ctx, k, idem.Lease{}, []byte(`1`)) }, isErr(idem.ErrStaleToken)},
		"FailPermanent/too large": {func() error {
			return s.FailPermanent(ctx, k, lease, idem.StoredError{Class: "c", Message: strings.Repeat("m", 100)})
		}, func(err error) bool {
			var tooLarge *idem.PayloadTooLargeError
			return errors.As(err, &tooLarge)
		}},
		"FailTransient/zero key": {func() error { return s.FailTransient(ctx, idem.Key{}, lease) }, isErr(idem.ErrInvalidKey)},
		"Heartbeat/zero key": {func() error {
			_, err := s.Heartbeat(ctx, idem.Key{}, lease, 0)
			return err
		}, isErr(idem.ErrInvalidKey)},
	} {
		wg.Go(func() {
			start := time.Now()
			err := c.call()
			if took := time.Since(start); !c.ok(err) || took > time.Second {
				t.Errorf("%s: returned after %v with %v; want its own error at once", name, took.Round(time.Millisecond), err)
			}
		})
	}
	wg.Wait()
	if err := <-blocked; !errors.Is(err, idem.ErrUnavailable) {
		t.Errorf("the valid Begin: %v, want ErrUnavailable after the busy timeout", err)
	}
}
