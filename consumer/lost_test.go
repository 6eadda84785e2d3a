package consumer_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/consumer"
	"github.com/idemgo/idem/store/memstore"
)

// heartbeatSwitch is a store whose heartbeats can be made to fail, as an
// unreachable store's do, or to answer without extending anything, so
// that a test can let a lease lapse while the handler runs.
type heartbeatSwitch struct {
	idem.Store
	mode atomic.Int32 // one of the beat* constants
}

const (
	beatReal = iota
	beatDown
	beatFrozen
)

func (s *heartbeatSwitch) Heartbeat(ctx context.Context, key idem.Key, lease idem.Lease, extend time.Duration) (idem.Lease, error) {
	switch s.mode.Load() {
	case beatDown:
		return idem.Lease{}, idem.Unavailable(errors.New("connection refused"))
	case beatFrozen:
		return lease, nil
	}
	return s.Store.Heartbeat(ctx, key, lease, extend)
}

// TestStoreLedgerLostLeaseCancelsHandler: with a StoreLedger, a handler
// whose claim is lost while it runs has its context cancelled with cause
// idem.ErrLeaseLost: when heartbeats cannot reach the store for as long
// as the lease lasts, and when another delivery took the key over.
// Handle's error then says that the lease was lost, also when the handler
// returned just ctx.Err() (context.Canceled, like the caller's own
// cancellation).
func TestStoreLedgerLostLeaseCancelsHandler(t *testing.T) {
	const lease = 3 * time.Second
	for _, tc := range []struct {
		name     string
		takeover bool
		ctxErr   bool // the handler returns ctx.Err(), not the cause
	}{
		{"lapsed while the store is unreachable", false, false},
		{"taken over", true, false},
		{"taken over, handler returns ctx.Err", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem, err := memstore.New(memstore.Config{})
				if err != nil {
					t.Fatal(err)
				}
				s := &heartbeatSwitch{Store: mem}
				ledger := consumer.StoreLedger(s, idem.MustNamespace("orders"), &consumer.StoreLedgerOpts{Lease: lease})
				started := make(chan struct{})
				proceed := make(chan struct{})
				var cause error
				var cancelledAfter time.Duration
				c, err := consumer.New(consumer.Config[msg]{
					Ledger: ledger,
					Key:    func(m msg) (string, error) { return m.ID, nil },
					Handle: func(ctx context.Context, m msg) error {
						start := time.Now()
						close(started)
						select {
						case <-ctx.Done():
							cause, cancelledAfter = context.Cause(ctx), time.Since(start)
							if tc.ctxErr {
								return ctx.Err()
							}
							return cause
						case <-proceed:
							return nil
						}
					},
				})
				if err != nil {
					t.Fatal(err)
				}
				done := make(chan struct{})
				var outcome consumer.Outcome
				var herr error
				go func() {
					defer close(done)
					outcome, herr = c.Handle(context.Background(), msg{ID: "m"})
				}()
				<-started
				if tc.takeover {
					s.mode.Store(beatFrozen) // the lease is not extended
					time.Sleep(lease + time.Second)
					// Another consumer process claims the key.
					claim, state, err := ledger.Claim(context.Background(), "m")
					if err != nil || state != consumer.Claimed {
						t.Fatalf("claim after the lease lapsed: %v, %v", state, err)
					}
					defer func() {
						if err := claim.Release(context.Background()); err != nil {
							t.Error(err)
						}
					}()
					s.mode.Store(beatReal) // the next heartbeat finds the key taken
				} else {
					s.mode.Store(beatDown)
				}
				time.Sleep(2 * lease)
				select {
				case <-done:
				default:
					close(proceed)
					<-done
					t.Fatal("the handler's context was not cancelled after its lease was lost")
				}
				if !errors.Is(cause, idem.ErrLeaseLost) {
					t.Errorf("the handler's context ended with cause %v, want idem.ErrLeaseLost", cause)
				}
				if !tc.takeover && cancelledAfter < lease {
					t.Errorf("cancelled %s after the claim, before its lease of %s lapsed", cancelledAfter, lease)
				}
				if outcome != consumer.Failed || !errors.Is(herr, idem.ErrLeaseLost) {
					t.Errorf("Handle = %s, %v; want Failed with ErrLeaseLost", outcome, herr)
				}
				if tc.ctxErr && !errors.Is(herr, context.Canceled) {
					t.Errorf("Handle = %v; want the handler's own error (context.Canceled) kept", herr)
				}
			})
		})
	}
}
