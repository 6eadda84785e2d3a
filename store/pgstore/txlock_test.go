package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
	"github.com/idemgo/idem/store/pgstore"
)

// TestTxBeginThatLosesARaceKeepsNoLock: a transactional Begin that was
// about to write the record (so took the key's lock) but found, when it
// wrote, that a writer which does not take the lock (the owner's
// lease-mode Heartbeat extending a lapsed lease, or a row committed
// meanwhile) got there first, answers InFlight and keeps no lock on the
// key: while its transaction stays open, the key, once released, is
// Fresh to another transaction's Begin and to a lease-mode Begin, and a
// transaction settling that reservation does not wait.
func TestTxBeginThatLosesARaceKeepsNoLock(t *testing.T) {
	for _, c := range []struct{ race, driver string }{
		{"TakeoverOfALeaseExtendedMeanwhile", "pgx"},
		{"CreationOfARowInsertedMeanwhile", "pgx"},
		{"TakeoverOfALeaseExtendedMeanwhile", "database/sql"},
		{"CreationOfARowInsertedMeanwhile", "database/sql"},
	} {
		race := c.race
		t.Run(c.race+"/"+c.driver, func(t *testing.T) {
			clock := idemtest.NewClock()
			tb := setup(t, pgstore.Config{Now: clock.Now})
			ctx := ctxT(t)
			ns := idemtest.RandomNamespace(t)
			k := mustKey(t, ns, "raced")
			req := mustRequest(t, `{"a":1}`)
			quick := func() context.Context {
				c, cancel := context.WithTimeout(ctx, 3*time.Second)
				t.Cleanup(cancel)
				return c
			}

			// other is a transaction writing the key as a writer that does
			// not take its lock would, left open until the Begin below
			// waits for its row.
			other, err := tb.pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = other.Rollback(ctx) }()
			var owner idem.Lease
			switch race {
			case "TakeoverOfALeaseExtendedMeanwhile":
				o, err := tb.store.Begin(ctx, k, req, nil)
				if err != nil {
					t.Fatal(err)
				}
				wantOutcome(t, o, idem.Fresh)
				owner = o.Lease
				clock.Advance(idem.DefaultLease + time.Second) // lapsed: a Begin of req may take it over
				end := clock.Now().Add(time.Hour)
				if _, err := other.Exec(ctx, `UPDATE idempotency_record
					SET lease_expires_at = $1, expires_at = greatest(expires_at, $1)
					WHERE namespace = $2 AND scope = '' AND key_value = $3`, end, string(ns), k.Value()); err != nil {
					t.Fatal(err)
				}
			case "CreationOfARowInsertedMeanwhile":
				now := clock.Now()
				owner = idem.Lease{Token: "other-token", Fence: 1}
				if _, err := other.Exec(ctx, `INSERT INTO idempotency_record
					(namespace, scope, key_value, request_hash, request_payload, status,
					 owner_token, fence, created_at, expires_at, lease_expires_at)
					VALUES ($1, '', $2, $3, $4, 'in_progress', $5, 1, $6, $7, $8)`,
					string(ns), k.Value(), req.Fingerprint.Bytes(), string(req.RecordedPayload()),
					owner.Token, now, now.Add(time.Hour), now.Add(time.Hour)); err != nil {
					t.Fatal(err)
				}
			}

			// s is the store bound to the transaction whose Begin loses
			// the race; it stays open to the end of the test.
			var s idem.Store
			if c.driver == "pgx" {
				tx, err := tb.pool.Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = tx.Rollback(ctx) }()
				s = tb.store.WithTx(tx)
			} else {
				db := stdlib.OpenDBFromPool(tb.pool)
				defer func() { _ = db.Close() }()
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = tx.Rollback() }()
				s = tb.store.WithSQLTx(tx)
			}
			type answer struct {
				o   idem.Outcome
				err error
			}
			done := make(chan answer, 1)
			go func() {
				o, err := s.Begin(ctx, k, req, nil)
				done <- answer{o, err}
			}()
			pgstore.WaitActive(t, tb.pool, `wait_event_type = 'Lock' AND query LIKE 'WITH cur AS%'`,
				"the transactional Begin did not wait for the other writer's row")
			if err := other.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			a := <-done
			if a.err != nil {
				t.Fatalf("Begin: %v", a.err)
			}
			wantOutcome(t, a.o, idem.InFlight)

			// tx stays open. The owner releases the key: it is Fresh to
			// another transaction.
			if err := tb.store.FailTransient(quick(), k, owner); err != nil {
				t.Fatalf("FailTransient: %v", err)
			}
			tx2, err := tb.pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			o2, err := tb.store.WithTx(tx2).Begin(quick(), k, req, nil)
			_ = tx2.Rollback(ctx)
			if err != nil {
				t.Fatalf("Begin in another transaction: %v", err)
			}
			wantOutcome(t, o2, idem.Fresh)
			// And to a lease-mode Begin, whose reservation a transaction
			// settles without waiting.
			o3, err := tb.store.Begin(quick(), k, req, nil)
			if err != nil {
				t.Fatalf("lease-mode Begin: %v", err)
			}
			wantOutcome(t, o3, idem.Fresh)
			tx3, err := tb.pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx3.Rollback(ctx) }()
			if err := tb.store.WithTx(tx3).Commit(quick(), k, o3.Lease, []byte(`"settled"`)); err != nil {
				t.Fatalf("Commit in a transaction while the first one is open: %v", err)
			}
			if err := tx3.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			wantOutcome(t, mustBeginOn(t, quick(), s, k, req), idem.PriorResult)
		})
	}
}

// TestTxStaleSettleKeepsNoLock: a transactional settle call whose lease
// is no longer current (the key was taken over) answers ErrStaleToken and
// keeps no lock on the key: while its transaction stays open, the new
// owner settles in a transaction of its own without waiting, and once the
// key is released, another transaction's Begin finds it Fresh.
func TestTxStaleSettleKeepsNoLock(t *testing.T) {
	clock := idemtest.NewClock()
	tb := setup(t, pgstore.Config{Now: clock.Now})
	ctx := ctxT(t)
	k := mustKey(t, idemtest.RandomNamespace(t), "taken-over")
	req := mustRequest(t, `{"a":1}`)
	quick := func() context.Context {
		c, cancel := context.WithTimeout(ctx, 3*time.Second)
		t.Cleanup(cancel)
		return c
	}
	o1, err := tb.store.Begin(ctx, k, req, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantOutcome(t, o1, idem.Fresh)
	clock.Advance(idem.DefaultLease + time.Second)
	o2, err := tb.store.Begin(ctx, k, req, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantOutcome(t, o2, idem.Fresh)

	for name, stale := range map[string]func(idem.Store) error{
		"Heartbeat":     func(s idem.Store) error { _, err := s.Heartbeat(quick(), k, o1.Lease, 0); return err },
		"Commit":        func(s idem.Store) error { return s.Commit(quick(), k, o1.Lease, []byte(`1`)) },
		"FailPermanent": func(s idem.Store) error { return s.FailPermanent(quick(), k, o1.Lease, idem.StoredError{Class: "x"}) },
		"FailTransient": func(s idem.Store) error { return s.FailTransient(quick(), k, o1.Lease) },
	} {
		t.Run(name, func(t *testing.T) {
			tx, err := tb.pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback(ctx) }()
			if err := stale(tb.store.WithTx(tx)); !errors.Is(err, idem.ErrStaleToken) {
				t.Fatalf("%s with the lapsed lease: %v, want ErrStaleToken", name, err)
			}
			// tx stays open; the current owner settles in its own.
			tx2, err := tb.pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx2.Rollback(ctx) }()
			if _, err := tb.store.WithTx(tx2).Heartbeat(quick(), k, o2.Lease, 0); err != nil {
				t.Fatalf("the owner's Heartbeat in another transaction: %v", err)
			}
			if err := tx2.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
	if err := tb.store.FailTransient(ctx, k, o2.Lease); err != nil {
		t.Fatal(err)
	}
	tx, err := tb.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := tb.store.WithTx(tx).FailTransient(quick(), k, o2.Lease); !errors.Is(err, idem.ErrStaleToken) {
		t.Fatalf("FailTransient of a released key: %v, want ErrStaleToken", err)
	}
	tx2, err := tb.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx2.Rollback(ctx) }()
	wantOutcome(t, mustBeginOn(t, quick(), tb.store.WithTx(tx2), k, req), idem.Fresh)
}

// mustBeginOn is Begin on s with ctx, failing t on an error.
func mustBeginOn(t *testing.T, ctx context.Context, s idem.Store, k idem.Key, req idem.Request) idem.Outcome {
	t.Helper()
	o, err := s.Begin(ctx, k, req, nil)
	if err != nil {
		t.Fatalf("Begin: %v", err)
	}
	return o
}
