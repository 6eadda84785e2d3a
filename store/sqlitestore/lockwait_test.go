package sqlitestore_test

import (
	"context"
	"errors"
	"fmt"
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
		})
	}
}
