package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
	"github.com/idemgo/idem/store/pgstore"
)

// TestCancelledBeginWritesNothing: a lease-mode Begin whose context ends
// while its statement waits on the server (here for a row another
// transaction holds) reports the context's end, soon, and leaves nothing
// behind: the statement is cancelled on the server, not left to take the
// key over once the row is free, under a lease nobody holds, so that the
// key's next Begin would be told InFlight until that lease lapsed.
func TestCancelledBeginWritesNothing(t *testing.T) {
	for _, pipeline := range []bool{false, true} {
		name := "Plain"
		if pipeline {
			name = "Pipeline"
		}
		t.Run(name, func(t *testing.T) {
			clock := idemtest.NewClock()
			tb := setup(t, pgstore.Config{Now: clock.Now, Lease: time.Minute, Pipeline: pipeline})
			ctx := ctxT(t)
			ns := idemtest.RandomNamespace(t)
			k := mustKey(t, ns, "k")
			r := mustRequest(t, `{}`)
			short := &idem.BeginOpts{Retention: time.Second, Lease: time.Second}
			if _, err := tb.store.Begin(ctx, k, r, short); err != nil {
				t.Fatal(err)
			}
			clock.Advance(2 * time.Second) // the record expired: the next Begin replaces it
			tx, err := tb.pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback(ctx) }()
			if _, err := tx.Exec(ctx, `SELECT FROM `+pgstore.DefaultTable+` WHERE namespace = $1 FOR UPDATE`, string(ns)); err != nil {
				t.Fatal(err)
			}
			bctx, cancel := context.WithCancel(ctx)
			defer cancel()
			begun := make(chan error, 1)
			go func() {
				o, err := tb.store.Begin(bctx, k, r, nil)
				if err == nil {
					err = errors.New("Begin answered " + o.Kind.String())
				}
				begun <- err
			}()
			// Until the Begin waits on the server for the row.
			pgstore.WaitActive(t, tb.pool, `wait_event_type = 'Lock' AND query LIKE '%pg_try_advisory_xact_lock%'`, "the Begin did not wait for the row")
			cancel()
			start := time.Now()
			if err := <-begun; !errors.Is(err, context.Canceled) {
				t.Fatalf("Begin waiting for the row: %v; want context.Canceled", err)
			}
			if took := time.Since(start); took > time.Second {
				t.Errorf("Begin returned %v after its context ended", took)
			}
			if err := tx.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			// Had the statement run on, it would have taken the row now.
			time.Sleep(200 * time.Millisecond)
			o, err := tb.store.Begin(ctx, k, r, nil)
			if err != nil || o.Kind != idem.Fresh {
				t.Fatalf("the next Begin = %s, %v; want Fresh: the cancelled Begin reserved the key", o.Kind, err)
			}
		})
	}
}

// TestDeadlinesLeaveNoKeyInFlight: Begins on many keys at once, each with
// a deadline of a few milliseconds, some of which end while the statement
// runs (directly or in a batch), leave no key in flight once they have
// returned: each either answered Fresh, and its caller committed, or
// reserved nothing (or released what it reserved).
func TestDeadlinesLeaveNoKeyInFlight(t *testing.T) {
	for _, pipeline := range []bool{false, true} {
		name := "Plain"
		if pipeline {
			name = "Pipeline"
		}
		t.Run(name, func(t *testing.T) {
			tb := setup(t, pgstore.Config{Pipeline: pipeline, PipelineLanes: 2, Lease: time.Minute})
			ns := idemtest.RandomNamespace(t)
			r := mustRequest(t, `{}`)
			var wg sync.WaitGroup
			for w := range 8 {
				wg.Go(func() {
					for i := range 40 {
						k := mustKey(t, ns, fmt.Sprintf("k%d-%d", w, i))
						ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rand.IntN(3000))*time.Microsecond)
						o, err := tb.store.Begin(ctx, k, r, nil)
						cancel()
						switch {
						case err == nil && o.Kind == idem.Fresh:
							if err := tb.store.Commit(ctxT(t), k, o.Lease, []byte(`1`)); err != nil {
								t.Errorf("Commit: %v", err)
							}
						case err == nil:
							t.Errorf("Begin of a new key = %s", o.Kind)
						case !errors.Is(err, context.DeadlineExceeded):
							t.Errorf("Begin: %v, want the deadline's error", err)
						}
					}
				})
			}
			wg.Wait()
			// A reservation whose caller left is released from another
			// goroutine once the statement's answer comes.
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				var n int
				if err := tb.pool.QueryRow(ctxT(t), `SELECT count(*) FROM `+pgstore.DefaultTable+`
					WHERE namespace = $1 AND status = 'in_progress'`, string(ns)).Scan(&n); err != nil {
					t.Fatal(err)
				}
				if n == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d keys are in flight, under leases nobody holds", n)
				}
			}
		})
	}
}
