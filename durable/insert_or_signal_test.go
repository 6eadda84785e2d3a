package durable_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/idemgo/idem/durable"
)

// Concurrent InsertOrSignal calls with one key make one instance, and each
// call's signal reaches it once; a repeated dedup key is stored once.
func TestInsertOrSignalRace(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	b := setup(t, nil)
	const n = 32
	opts := &durable.InsertOpts{CorrelationKey: "cart:1"}
	var (
		wg       sync.WaitGroup
		start    = make(chan struct{})
		ids      [n]int64
		inserted [n]bool
		errs     [n]error
	)
	for i := range n {
		wg.Go(func() {
			<-start
			// Calls 0 and 1 share a dedup key.
			dedup := fmt.Sprintf("evt-%d", max(i, 1))
			ids[i], inserted[i], errs[i] = b.client.InsertOrSignal(ctxT(t), ctl.With(ctlState{}), opts, "item", i, dedup)
		})
	}
	close(start)
	wg.Wait()
	inserts := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("call %d: %v", i, errs[i])
		}
		if ids[i] != ids[0] {
			t.Fatalf("call %d reached instance %d, call 0 instance %d", i, ids[i], ids[0])
		}
		if inserted[i] {
			inserts++
		}
	}
	if inserts != 1 {
		t.Fatalf("%d calls inserted, want 1", inserts)
	}
	if got := b.count(t, `SELECT count(*) FROM durable_instance WHERE correlation_key = 'cart:1'`); got != 1 {
		t.Fatalf("%d instances carry the key, want 1", got)
	}
	in := b.get(t, ids[0])
	if len(in.Inbox) != n-1 {
		t.Fatalf("inbox holds %d signals, want %d", len(in.Inbox), n-1)
	}
	seen := map[string]bool{}
	for _, s := range in.Inbox {
		if s.Name != "item" || seen[s.DedupKey] {
			t.Fatalf("unexpected signal %+v", s)
		}
		seen[s.DedupKey] = true
	}
}

func TestInsertOrSignalErrors(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	b := setup(t, nil)
	ctx := ctxT(t)
	if _, _, err := b.client.InsertOrSignal(ctx, ctl.With(ctlState{}), nil, "go", nil, ""); err == nil {
		t.Error("InsertOrSignal without a key succeeded")
	}
	unscoped := &durable.InsertOpts{CorrelationKey: "k", CorrelationScope: []durable.Status{}}
	if _, _, err := b.client.InsertOrSignal(ctx, ctl.With(ctlState{}), unscoped, "go", nil, ""); err == nil {
		t.Error("InsertOrSignal with an empty scope succeeded")
	}

	// A key kept by a done instance is a duplicate.
	kept := &durable.InsertOpts{CorrelationKey: "kept",
		CorrelationScope: append(durable.LiveStatuses(), durable.StatusDone, durable.StatusCancelled)}
	id, inserted, err := b.client.InsertOrSignal(ctx, ctl.With(ctlState{}), kept, "go", 1, "")
	if err != nil || !inserted {
		t.Fatalf("first InsertOrSignal: %d, %v, %v", id, inserted, err)
	}
	if err := b.client.Cancel(ctx, durable.ByID(id), ""); err != nil {
		t.Fatal(err)
	}
	_, _, err = b.client.InsertOrSignal(ctx, ctl.With(ctlState{}), kept, "go", 2, "")
	var dup *durable.DuplicateError
	if !errors.As(err, &dup) || dup.ID != id {
		t.Fatalf("InsertOrSignal on a kept key: %v, want a *DuplicateError with id %d", err, id)
	}

	// A key freed by its instance's end takes a new instance.
	free := &durable.InsertOpts{CorrelationKey: "free"}
	first, _, err := b.client.InsertOrSignal(ctx, ctl.With(ctlState{}), free, "go", 1, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.client.Cancel(ctx, durable.ByKey("free"), ""); err != nil {
		t.Fatal(err)
	}
	second, inserted, err := b.client.InsertOrSignal(ctx, ctl.With(ctlState{}), free, "go", 2, "")
	if err != nil || !inserted || second == first {
		t.Fatalf("InsertOrSignal on a freed key: %d (first %d), inserted %v, %v", second, first, inserted, err)
	}
}

// An instance inserted with an empty scope carries its key only as an
// address: it does not occupy the key, so InsertOrSignal neither signals
// it nor lets it stand in for the occupant. With no occupant, it inserts
// its own instance; with one, it signals that one, the address-only
// instance notwithstanding.
func TestInsertOrSignalIgnoresInstancesThatOnlyAddressTheKey(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	b := setup(t, nil)
	ctx := ctxT(t)
	addr := b.insert(t, ctl.With(ctlState{}), &durable.InsertOpts{CorrelationKey: "k", CorrelationScope: []durable.Status{}})

	opts := &durable.InsertOpts{CorrelationKey: "k"}
	id, inserted, err := b.client.InsertOrSignal(ctx, ctl.With(ctlState{}), opts, "go", 1, "")
	if err != nil || !inserted || id == addr {
		t.Fatalf("InsertOrSignal beside an address-only instance %d: %d, inserted %v, %v; want a new instance", addr, id, inserted, err)
	}
	again, inserted, err := b.client.InsertOrSignal(ctx, ctl.With(ctlState{}), opts, "go", 2, "")
	if err != nil || inserted || again != id {
		t.Fatalf("second InsertOrSignal: %d, inserted %v, %v; want the signal to occupant %d", again, inserted, err, id)
	}
	if in := b.get(t, addr); len(in.Inbox) != 0 {
		t.Fatalf("the address-only instance got %v", in.Inbox)
	}
	if in := b.get(t, id); len(in.Inbox) != 2 {
		t.Fatalf("the occupant's inbox %v, want both signals", in.Inbox)
	}
}

// InsertOrSignalTx inserts and signals only if the caller's transaction
// commits; meanwhile a concurrent call with the key waits for it, and then
// signals the instance it committed or, after a rollback, inserts its own.
func TestInsertOrSignalTxJoinsTheCallersTransaction(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	b := setup(t, nil)
	ctx := ctxT(t)
	opts := &durable.InsertOpts{CorrelationKey: "cart:tx"}
	keyed := func() int {
		return b.count(t, `SELECT count(*) FROM durable_instance WHERE correlation_key = 'cart:tx'`)
	}

	for _, tc := range []struct {
		name   string
		commit bool
	}{
		{"rollback", false},
		{"commit", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tx, err := b.pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx) //nolint:errcheck // a no-op once committed
			var xid string
			if err := tx.QueryRow(ctx, `SELECT pg_current_xact_id()::text`).Scan(&xid); err != nil {
				t.Fatal(err)
			}
			id, inserted, err := b.client.InsertOrSignalTx(ctx, tx, ctl.With(ctlState{}), opts, "item", "in tx", "")
			if err != nil || !inserted {
				t.Fatalf("InsertOrSignalTx: %d, %v, %v", id, inserted, err)
			}
			if n := b.count(t, `SELECT count(*) FROM durable_instance WHERE id = $1`, id); n != 0 {
				t.Fatal("the instance is visible before the commit")
			}

			// A concurrent call waits for tx's insert to end.
			type result struct {
				id       int64
				inserted bool
				err      error
			}
			done := make(chan result, 1)
			go func() {
				var r result
				r.id, r.inserted, r.err = b.client.InsertOrSignal(ctx, ctl.With(ctlState{}), opts, "item", "outside", "")
				done <- r
			}()
			waitFor(t, "the concurrent call to wait for the transaction", func() bool {
				return b.count(t, `SELECT count(*) FROM pg_locks WHERE locktype = 'transactionid'
					AND NOT granted AND transactionid::text = $1`, xid) == 1
			})
			if tc.commit {
				err = tx.Commit(ctx)
			} else {
				err = tx.Rollback(ctx)
			}
			if err != nil {
				t.Fatal(err)
			}
			r := <-done
			if r.err != nil {
				t.Fatalf("concurrent InsertOrSignal: %v", r.err)
			}
			in := b.get(t, r.id)
			if tc.commit {
				if r.id != id || r.inserted || len(in.Inbox) != 2 {
					t.Fatalf("after the commit the concurrent call reached %d (inserted %v) with %d signals; want %d, false, 2",
						r.id, r.inserted, len(in.Inbox), id)
				}
			} else {
				if !r.inserted || r.id == id || len(in.Inbox) != 1 || string(in.Inbox[0].Payload) != `"outside"` {
					t.Fatalf("after the rollback the concurrent call reached %d (inserted %v) with inbox %v; want its own instance",
						r.id, r.inserted, in.Inbox)
				}
				if n := b.count(t, `SELECT count(*) FROM durable_instance WHERE id = $1`, id); n != 0 {
					t.Fatal("the rolled-back instance exists")
				}
				// Make room for the next case.
				if err := b.client.Cancel(ctx, durable.ByID(r.id), ""); err != nil {
					t.Fatal(err)
				}
			}
		})
	}

	// A signal to an existing instance, rolled back, is not stored.
	live, err := b.client.Lookup(ctx, "cart:tx")
	if err != nil {
		t.Fatal(err)
	}
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if id, inserted, err := b.client.InsertOrSignalTx(ctx, tx, ctl.With(ctlState{}), opts, "item", "dropped", ""); err != nil || inserted || id != live {
		t.Fatalf("InsertOrSignalTx to the live instance: %d, %v, %v; want %d, false", id, inserted, err, live)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if in := b.get(t, live); len(in.Inbox) != 2 {
		t.Fatalf("after the rollback the inbox holds %d signals, want 2", len(in.Inbox))
	}
	if n := keyed(); n != 2 {
		t.Fatalf("%d instances carry the key, want 2 (one cancelled, one live)", n)
	}
}
