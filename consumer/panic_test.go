package consumer_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/consumer"
	"github.com/idemgo/idem/store/memstore"
)

// panickyHeartbeats is a store whose Heartbeat panics, as a buggy store or
// a wrapper of one might.
type panickyHeartbeats struct{ idem.Store }

func (panickyHeartbeats) Heartbeat(context.Context, idem.Key, idem.Lease, time.Duration) (idem.Lease, error) {
	panic("heartbeat exploded")
}

// TestStoreLedgerHeartbeatPanicIsReported: with a StoreLedger, a store
// whose Heartbeat panics crashes neither the process (from the heartbeat's
// goroutine) nor Handle's caller. The claim counts as lost: the handler's
// context is cancelled with cause idem.ErrLeaseLost; the key is released,
// not marked done, whatever the handler returns; and Handle's error
// carries the panic as an *idem.PanicError.
func TestStoreLedgerHeartbeatPanicIsReported(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fail    bool // the handler returns ctx.Err()
		outcome consumer.Outcome
	}{
		{"handler succeeds", false, consumer.Handled},
		{"handler fails", true, consumer.Failed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem, err := memstore.New(memstore.Config{})
			if err != nil {
				t.Fatal(err)
			}
			ns := idem.MustNamespace("orders")
			l := consumer.StoreLedger(panickyHeartbeats{mem}, ns, &consumer.StoreLedgerOpts{Lease: 30 * time.Millisecond})
			var cause error
			c, err := consumer.New(consumer.Config[msg]{
				Ledger: l,
				Key:    func(m msg) (string, error) { return m.ID, nil },
				Handle: func(ctx context.Context, _ msg) error {
					select {
					case <-ctx.Done():
					case <-time.After(10 * time.Second):
						t.Error("the handler's context was not cancelled after the heartbeat panicked")
					}
					cause = context.Cause(ctx)
					if tc.fail {
						return ctx.Err()
					}
					return nil
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			var (
				outcome consumer.Outcome
				p       any
			)
			func() {
				defer func() { p = recover() }()
				outcome, err = c.Handle(context.Background(), msg{ID: "m1"})
			}()
			if p != nil {
				t.Fatalf("Handle panicked with %v, want an error", p)
			}
			if !errors.Is(cause, idem.ErrLeaseLost) {
				t.Errorf("the handler's context's cause = %v, want idem.ErrLeaseLost", cause)
			}
			if outcome != tc.outcome {
				t.Errorf("outcome = %v, want %v", outcome, tc.outcome)
			}
			if pe, ok := errors.AsType[*idem.PanicError](err); !ok || pe.Value != "heartbeat exploded" {
				t.Errorf("Handle's error = %v, want one carrying the heartbeat's *idem.PanicError", err)
			}
			k, _ := idem.ParseKey(ns, "m1")
			if _, err := mem.Get(context.Background(), k); !errors.Is(err, idem.ErrNotFound) {
				t.Errorf("Get after Handle = %v, want ErrNotFound (the key released)", err)
			}
		})
	}
}
