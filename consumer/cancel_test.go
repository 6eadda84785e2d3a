package consumer_test

import (
	"context"
	"errors"
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
