package pgstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
	"github.com/idemgo/idem/store/pgstore"
)

// TestPurgeAsOfBeyondTimestamptz: an asOf later than timestamptz can hold
// (as a "purge everything" might pass) purges every record of the
// namespace, in lease mode and in a caller's transaction, which it leaves
// usable; one earlier than that range purges nothing. Sent as is, such a
// time overflowed pgx's encoding, into 1970 or a date the server refused.
func TestPurgeAsOfBeyondTimestamptz(t *testing.T) {
	tb := setup(t, pgstore.Config{})
	ctx := ctxT(t)
	r := mustRequest(t, `{}`)
	for _, asOf := range []time.Time{
		time.Unix(1<<62, 0),
		time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-5000, 1, 1, 0, 0, 0, 0, time.UTC),
	} {
		ns := idemtest.RandomNamespace(t)
		for _, v := range []string{"a", "b"} {
			if _, err := tb.store.Begin(ctx, mustKey(t, ns, v), r, nil); err != nil {
				t.Fatal(err)
			}
		}
		want := 2
		if asOf.Year() < 0 {
			want = 0
		}
		if n, err := tb.store.PurgeExpired(ctx, ns, asOf); err != nil || n != want {
			t.Errorf("PurgeExpired(%d-…) = %d, %v; want %d", asOf.Year(), n, err, want)
		}

		ns = idemtest.RandomNamespace(t)
		tx, err := tb.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		s := tb.store.WithTx(tx)
		if _, err := s.Begin(ctx, mustKey(t, ns, "a"), r, nil); err != nil {
			t.Fatal(err)
		}
		if n, err := s.PurgeExpired(ctx, ns, asOf); err != nil || n != min(want, 1) {
			t.Errorf("PurgeExpired(%d-…) in a transaction = %d, %v; want %d", asOf.Year(), n, err, min(want, 1))
		}
		if _, err := s.Get(ctx, mustKey(t, ns, "a")); err != nil && !errors.Is(err, idem.ErrNotFound) {
			t.Errorf("the transaction after PurgeExpired: %v", err)
		}
		_ = tx.Rollback(ctx)
	}
}
