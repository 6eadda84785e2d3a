package sqlitestore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
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
