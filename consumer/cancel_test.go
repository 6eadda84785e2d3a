package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/consumer"
	"github.com/idemgo/idem/store/memstore"
)

// cancelAfterBegin is a store whose Begin succeeds and then cancels the
// caller's context: the consumer is shut down while its claim is made.
type cancelAfterBegin struct {
	idem.Store
	cancel context.CancelFunc
}

func (s cancelAfterBegin) Begin(ctx context.Context, key idem.Key, req idem.Request, opts *idem.BeginOpts) (idem.Outcome, error) {
	o, err := s.Store.Begin(ctx, key, req, opts)
	s.cancel()
	return o, err
}

// TestContextCancelledWhileClaimingFails: when Handle's ctx ends while the
// key is being claimed, the handler does not start on a context already
// done: the claim is released and Handle fails with ctx's error, so the
// redelivery runs the handler.
func TestContextCancelledWhileClaimingFails(t *testing.T) {
	s, err := memstore.New(memstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, runs := countingConsumer(t, consumer.StoreLedger(cancelAfterBegin{s, cancel}, idem.MustNamespace("orders"), nil))
	o, err := c.Handle(ctx, msg{ID: "m-1"})
	if o != consumer.Failed || !errors.Is(err, context.Canceled) || *runs != 0 {
		t.Fatalf("Handle cancelled while claiming = %s, %v, %d runs; want Failed with context.Canceled, none", o, err, *runs)
	}
	c2, runs2 := countingConsumer(t, consumer.StoreLedger(s, idem.MustNamespace("orders"), nil))
	if o, err := c2.Handle(context.Background(), msg{ID: "m-1"}); o != consumer.Handled || err != nil || *runs2 != 1 {
		t.Errorf("redelivery = %s, %v, %d runs; want Handled, one run (the claim released)", o, err, *runs2)
	}
}

// TestNilContextFails: Handle with a nil context (a programming error)
// fails with an error satisfying errors.Is(err, idem.ErrInvalidArgument),
// without claiming the key or running the handler, instead of panicking.
func TestNilContextFails(t *testing.T) {
	s, err := memstore.New(memstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	c, runs := countingConsumer(t, consumer.StoreLedger(s, idem.MustNamespace("orders"), nil))
	var nilCtx context.Context
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("Handle with a nil ctx panicked: %v", p)
			}
		}()
		o, err := c.Handle(nilCtx, msg{ID: "m-1"})
		if o != consumer.Failed || !errors.Is(err, idem.ErrInvalidArgument) || *runs != 0 {
			t.Errorf("Handle with a nil ctx = %s, %v, %d runs; want Failed with ErrInvalidArgument, none", o, err, *runs)
		}
	}()
	if o, err := c.Handle(context.Background(), msg{ID: "m-1"}); o != consumer.Handled || err != nil || *runs != 1 {
		t.Errorf("redelivery = %s, %v, %d runs; want Handled, one run", o, err, *runs)
	}
}

// TestContextCancelledWhileHandling: when Handle's ctx ends while the
// handler runs (the consumer is shutting down), the key is settled all
// the same, on every ledger: a handler that finishes its work and succeeds
// has its key marked done (Handled; the redelivery is a Duplicate), and one
// that gives up with ctx's error has it released (Failed with
// context.Canceled, not mistaken for a lost lease; the redelivery runs the
// handler again).
func TestContextCancelledWhileHandling(t *testing.T) {
	for name, newLedger := range ledgers(t) {
		t.Run(name, func(t *testing.T) {
			var runs atomic.Int32
			c, err := consumer.New(consumer.Config[msg]{
				Ledger: newLedger(),
				Key:    func(m msg) (string, error) { return m.ID, nil },
				Handle: func(ctx context.Context, m msg) error {
					runs.Add(1)
					shutdown := ctx.Value(shutdownKey{})
					if shutdown == nil {
						return nil // a redelivery
					}
					shutdown.(context.CancelFunc)()
					<-ctx.Done()
					if m.Fail {
						return ctx.Err()
					}
					return nil
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, giveUp := range []bool{false, true} {
				id := fmt.Sprintf("m-giveup-%v", giveUp)
				runs.Store(0)
				ctx, cancel := context.WithCancel(context.Background())
				ctx = context.WithValue(ctx, shutdownKey{}, cancel)
				o, err := c.Handle(ctx, msg{ID: id, Fail: giveUp})
				cancel()
				if giveUp {
					if o != consumer.Failed || !errors.Is(err, context.Canceled) || errors.Is(err, idem.ErrLeaseLost) {
						t.Fatalf("handler gave up on cancellation: Handle = %s, %v; want Failed with context.Canceled alone", o, err)
					}
				} else if o != consumer.Handled || err != nil {
					t.Fatalf("handler succeeded after cancellation: Handle = %s, %v; want Handled, nil", o, err)
				}
				o, err = c.Handle(context.Background(), msg{ID: id})
				want, wantRuns := consumer.Duplicate, int32(1)
				if giveUp {
					want, wantRuns = consumer.Handled, 2
				}
				if o != want || err != nil || runs.Load() != wantRuns {
					t.Errorf("redelivery (gave up: %v) = %s, %v, %d runs in all; want %s, %d runs", giveUp, o, err, runs.Load(), want, wantRuns)
				}
			}
		})
	}
}

// shutdownKey carries, in the context given to Handle, the cancel function
// of that context, for the handler to call.
type shutdownKey struct{}
