package pgstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
	"github.com/idemgo/idem/internal/pgtest"
	"github.com/idemgo/idem/store/pgstore"
)

// TestLeaseModeUnderStricterDefaultIsolation: with the server's
// default_transaction_isolation set to repeatable read or serializable (on
// the database, the role or the pool), a lease-mode Begin whose record is
// changed by another writer while it waits for the row answers from the
// record as it now is (InFlight here), not with the serialization failure
// its first statement met, and a settle call so raced answers as at read
// committed.
func TestLeaseModeUnderStricterDefaultIsolation(t *testing.T) {
	for _, iso := range []string{"repeatable read", "serializable"} {
		t.Run(iso, func(t *testing.T) {
			url := pgtest.URL(t)
			pc, err := pgxpool.ParseConfig(url)
			if err != nil {
				t.Fatal(err)
			}
			pc.ConnConfig.RuntimeParams["default_transaction_isolation"] = iso
			pool, err := pgxpool.NewWithConfig(ctxT(t), pc)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			clock := idemtest.NewClock()
			s, err := pgstore.New(pool, pgstore.Config{Now: clock.Now, Lease: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			ctx := ctxT(t)
			if err := s.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			other := newPool(t, url) // read committed, as the writer racing the store

			k := mustKey(t, "ns", "k")
			req := mustRequest(t, `{"a":1}`)
			first, err := s.Begin(ctx, k, req, nil)
			wantOutcome(t, first, idem.Fresh)
			if err != nil {
				t.Fatal(err)
			}
			clock.Advance(2 * time.Minute) // the lease lapses: the next Begin takes over

			// Another writer changes the record and holds its row, as a
			// takeover in progress does: the lease is live again.
			writer, err := other.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer writer.Rollback(ctx)
			live := clock.Now().Add(time.Minute)
			if _, err := writer.Exec(ctx, `UPDATE idempotency_record SET owner_token = 'other', fence = fence + 1, lease_expires_at = $1`, live); err != nil {
				t.Fatal(err)
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
			pgstore.WaitActive(t, other, `datname = current_database() AND wait_event_type = 'Lock'`, "the store's statement did not wait for the other writer's row")
			if err := writer.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			a := <-done
			if a.err != nil {
				t.Fatalf("Begin racing a writer: %v", a.err)
			}
			wantOutcome(t, a.o, idem.InFlight)

			// An owner's Commit racing a writer that takes its record over
			// is told its lease is stale.
			k2 := mustKey(t, "ns", "k2")
			second, err := s.Begin(ctx, k2, req, nil)
			if err != nil {
				t.Fatal(err)
			}
			wantOutcome(t, second, idem.Fresh)
			writer, err = other.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer writer.Rollback(ctx)
			if _, err := writer.Exec(ctx, `UPDATE idempotency_record SET owner_token = 'third', fence = fence + 1 WHERE key_value = 'k2'`); err != nil {
				t.Fatal(err)
			}
			errs := make(chan error, 1)
			go func() { errs <- s.Commit(ctx, k2, second.Lease, []byte(`1`)) }()
			pgstore.WaitActive(t, other, `datname = current_database() AND wait_event_type = 'Lock'`, "the store's statement did not wait for the other writer's row")
			if err := writer.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-errs; !errors.Is(err, idem.ErrStaleToken) {
				t.Fatalf("stale Commit racing a writer: %v, want ErrStaleToken", err)
			}
		})
	}
}
