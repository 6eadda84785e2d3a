package consumer_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/consumer"
)

// TestStoreLedgerTakeoverOnRealStores: on every store, a delivery whose
// consumer stopped renewing its claim (its heartbeats cannot reach the
// store, as a crashed or partitioned consumer's) is InProgress to a
// redelivery only until the claim's lease lapses, with a RetryAfter within
// the lease; the redelivery then takes the key over, runs the handler and
// marks the key done. The first delivery, finishing late, is told its
// lease was lost (its context's cause, and Handled with an error wrapping
// idem.ErrStaleToken) and does not overwrite the redelivery's record: a
// third delivery is a Duplicate.
func TestStoreLedgerTakeoverOnRealStores(t *testing.T) {
	const lease = 500 * time.Millisecond
	for name, newStore := range stores(t) {
		t.Run(name, func(t *testing.T) {
			s := &heartbeatSwitch{Store: newStore()}
			ledger := consumer.StoreLedger(s, idem.MustNamespace("orders"), &consumer.StoreLedgerOpts{Lease: lease})
			started := make(chan struct{}, 2)
			proceed := make(chan struct{})
			var firstCause error
			c, err := consumer.New(consumer.Config[msg]{
				Ledger: ledger,
				Key:    func(m msg) (string, error) { return m.ID, nil },
				Handle: func(ctx context.Context, m msg) error {
					started <- struct{}{}
					if m.Fail { // the stalled first delivery, which finishes late
						<-ctx.Done()
						firstCause = context.Cause(ctx)
						<-proceed
					}
					return nil
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			type result struct {
				o   consumer.Outcome
				err error
			}
			first := make(chan result, 1)
			s.mode.Store(beatDown)
			go func() {
				o, err := c.Handle(context.Background(), msg{ID: "m", Fail: true})
				first <- result{o, err}
			}()
			<-started
			// A broker redelivering, delayed by each InProgress's RetryAfter.
			deadline := time.Now().Add(20 * lease)
			for {
				o, err := c.Handle(context.Background(), msg{ID: "m"})
				if o == consumer.Handled && err == nil {
					break
				}
				var inFlight *idem.InFlightError
				if o != consumer.InProgress || !errors.As(err, &inFlight) || inFlight.RetryAfter <= 0 || inFlight.RetryAfter > lease {
					t.Fatalf("redelivery while the first holds the key = %s, %v; want InProgress with a RetryAfter in (0, %v]", o, err, lease)
				}
				if time.Now().After(deadline) {
					t.Fatal("the lapsed claim was never taken over")
				}
				time.Sleep(inFlight.RetryAfter)
			}
			close(proceed)
			r := <-first
			if !errors.Is(firstCause, idem.ErrLeaseLost) {
				t.Errorf("the first handler's context ended with cause %v, want idem.ErrLeaseLost", firstCause)
			}
			if r.o != consumer.Handled || !errors.Is(r.err, idem.ErrStaleToken) {
				t.Errorf("first delivery, finishing after the takeover = %s, %v; want Handled with idem.ErrStaleToken", r.o, r.err)
			}
			if o, err := c.Handle(context.Background(), msg{ID: "m"}); o != consumer.Duplicate || err != nil {
				t.Errorf("third delivery = %s, %v; want Duplicate", o, err)
			}
		})
	}
}
