package consumer_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/consumer"
	"github.com/idemgo/idem/store/memstore"
)

// failingCommit is a store whose Commit fails as an unreachable store's
// does: without writing anything, or (applied) after the write was
// applied, as when the reply is lost.
type failingCommit struct {
	idem.Store
	applied bool
}

func (s failingCommit) Commit(ctx context.Context, key idem.Key, lease idem.Lease, result []byte) error {
	if s.applied {
		if err := s.Store.Commit(ctx, key, lease, result); err != nil {
			return err
		}
	}
	return idem.Unavailable(errors.New("connection reset"))
}

// TestStoreLedgerFailedCompleteReleases: when a StoreLedger cannot mark a
// handled key done (its Commit fails, not with ErrStaleToken, through
// every repeat within half of the Complete's settle bound), Handle
// answers Handled with the error and releases the key, as idem.Do does,
// rather than leave it in flight until its lease lapses. When the Commit
// was applied all the same (a lost reply), its repeat finds the key done:
// Handle answers Handled without an error, and a redelivery is a
// Duplicate.
func TestStoreLedgerFailedCompleteReleases(t *testing.T) {
	for _, tc := range []struct {
		name    string
		applied bool
		want    idem.Status // "" for no record
		again   consumer.Outcome
	}{
		{"not applied", false, "", consumer.Handled},
		{"applied, reply lost", true, idem.StatusCommitted, consumer.Duplicate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem, err := memstore.New(memstore.Config{})
				if err != nil {
					t.Fatal(err)
				}
				ns := idem.MustNamespace("orders")
				b := setup(t, consumer.StoreLedger(failingCommit{mem, tc.applied}, ns, nil))
				start := time.Now()
				outcome, err := b.c.Handle(context.Background(), msg{ID: "m1"})
				if outcome != consumer.Handled || errors.Is(err, idem.ErrUnavailable) != !tc.applied {
					t.Fatalf("Handle = %v, %v; want Handled, with the Commit's error unless applied", outcome, err)
				}
				if took := time.Since(start); !tc.applied && (took < 4*time.Second || took > 6*time.Second) {
					t.Errorf("Handle took %v; want the Commit repeated for half the settle bound, 5s", took)
				}
				k, _ := idem.ParseKey(ns, "m1")
				rec, err := mem.Get(context.Background(), k)
				switch {
				case tc.want == "" && !errors.Is(err, idem.ErrNotFound):
					t.Errorf("after a Complete that failed: record %+v, %v; want none (released)", rec, err)
				case tc.want != "" && (err != nil || rec.Status != tc.want):
					t.Errorf("after a Complete that failed: record %+v, %v; want %v", rec, err, tc.want)
				}
				if o := handle(t, b, msg{ID: "m1"}); o != tc.again {
					t.Errorf("the redelivery: %v, want %v", o, tc.again)
				}
			})
		})
	}
}
