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

// TestStoreLedgerLapsedNotTakenOverCompletes: a claim whose lease lapsed
// while heartbeats could not reach the store, and that no other delivery
// took over, is still this delivery's: the handler's context is cancelled
// with cause idem.ErrLeaseLost, but a handler that succeeds all the same
// has its key marked done (Handled, no error; the redelivery is a
// Duplicate).
func TestStoreLedgerLapsedNotTakenOverCompletes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const lease = 3 * time.Second
		mem, err := memstore.New(memstore.Config{})
		if err != nil {
			t.Fatal(err)
		}
		s := &heartbeatSwitch{Store: mem}
		s.mode.Store(beatDown)
		ledger := consumer.StoreLedger(s, idem.MustNamespace("orders"), &consumer.StoreLedgerOpts{Lease: lease})
		runs := 0
		c, err := consumer.New(consumer.Config[msg]{
			Ledger: ledger,
			Key:    func(m msg) (string, error) { return m.ID, nil },
			Handle: func(ctx context.Context, m msg) error {
				runs++
				if runs > 1 {
					return nil
				}
				select {
				case <-ctx.Done():
				case <-time.After(10 * lease):
					t.Error("the handler's context was not cancelled after its lease lapsed")
				}
				if !errors.Is(context.Cause(ctx), idem.ErrLeaseLost) {
					t.Errorf("cause = %v, want idem.ErrLeaseLost", context.Cause(ctx))
				}
				return nil // finished all the same
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		if o, err := c.Handle(context.Background(), msg{ID: "m"}); o != consumer.Handled || err != nil {
			t.Fatalf("Handle = %s, %v; want Handled, nil (nobody took the key over)", o, err)
		}
		if o, err := c.Handle(context.Background(), msg{ID: "m"}); o != consumer.Duplicate || err != nil || runs != 1 {
			t.Errorf("redelivery = %s, %v, %d runs; want Duplicate, one run", o, err, runs)
		}
	})
}
