package consumer_test

import (
	"context"
	"testing"

	"github.com/idemgo/idem/consumer"
	"github.com/idemgo/idem/internal/pgtest"
	"github.com/idemgo/idem/store/pgstore"
)

// TestHandledMessageRecordedAfterTheStoresConnectionDropped: when the
// store's connections drop while the handler runs (a PostgreSQL backend
// terminated, a failover), Complete's Commit fails once and is made again
// on a new connection: the message is marked handled, and its redelivery
// is a Duplicate, rather than the key released for the redelivery to run
// the handler a second time.
func TestHandledMessageRecordedAfterTheStoresConnectionDropped(t *testing.T) {
	ctx := context.Background()
	pool, drop := pgtest.DroppablePool(t)
	store, err := pgstore.New(pool, pgstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	runs := 0
	c, err := consumer.New(consumer.Config[string]{
		Ledger: consumer.StoreLedger(store, "orders", nil),
		Key:    func(m string) (string, error) { return m, nil },
		Handle: func(ctx context.Context, m string) error {
			runs++
			if drop() == 0 { // every connection of the store's pool
				t.Error("no connection of the store's pool to drop")
			}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := c.Handle(ctx, "msg-1"); out != consumer.Handled || err != nil {
		t.Fatalf("first delivery: %v, %v; want handled", out, err)
	}
	if out, err := c.Handle(ctx, "msg-1"); out != consumer.Duplicate || err != nil || runs != 1 {
		t.Errorf("redelivery: %v, %v after %d runs; want a duplicate, the handler run once", out, err, runs)
	}
}
