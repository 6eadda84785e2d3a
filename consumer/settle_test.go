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

// hangingStore is a memstore whose Commit, FailTransient and Heartbeat,
// once hang is set, block until their context ends, as a store that has
// stopped answering does. It tests the consumer's own bound on settling,
// not a store.
type hangingStore struct {
	idem.Store
	hang atomic.Bool
}

func (s *hangingStore) block(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

func (s *hangingStore) Commit(ctx context.Context, key idem.Key, lease idem.Lease, result []byte) error {
	if s.hang.Load() {
		return s.block(ctx)
	}
	return s.Store.Commit(ctx, key, lease, result)
}

func (s *hangingStore) FailTransient(ctx context.Context, key idem.Key, lease idem.Lease) error {
	if s.hang.Load() {
		return s.block(ctx)
	}
	return s.Store.FailTransient(ctx, key, lease)
}

func (s *hangingStore) Heartbeat(ctx context.Context, key idem.Key, lease idem.Lease, extend time.Duration) (idem.Lease, error) {
	if s.hang.Load() {
		return idem.Lease{}, s.block(ctx)
	}
	return s.Store.Heartbeat(ctx, key, lease, extend)
}

// TestSettleTimeoutBoundsAHangingStore: when the store stops answering
// after the handler ran, Handle returns after Config.SettleTimeout (10
// seconds by default) with the settle call's deadline error, instead of
// holding the consumer's goroutine for ever: after a success (Complete), a
// failure or a panic (Release), and when a heartbeat of the claim's lease
// is hanging as the handler returns.
func TestSettleTimeoutBoundsAHangingStore(t *testing.T) {
	const lease = 30 * time.Second // heartbeats every 10 s
	for _, tc := range []struct {
		name    string
		timeout time.Duration // Config.SettleTimeout
		wait    time.Duration // how long Handle takes with a hanging store
		handler func(ctx context.Context, s *hangingStore) error
		want    consumer.Outcome
		panics  bool
	}{
		{
			name: "complete, default timeout", wait: 10 * time.Second,
			handler: func(_ context.Context, s *hangingStore) error { s.hang.Store(true); return nil },
			want:    consumer.Handled,
		},
		{
			name: "complete", timeout: 3 * time.Second, wait: 3 * time.Second,
			handler: func(_ context.Context, s *hangingStore) error { s.hang.Store(true); return nil },
			want:    consumer.Handled,
		},
		{
			name: "release after an error", timeout: 3 * time.Second, wait: 3 * time.Second,
			handler: func(_ context.Context, s *hangingStore) error {
				s.hang.Store(true)
				return errors.New("handler failed")
			},
			want: consumer.Failed,
		},
		{
			name: "release after a panic", timeout: 3 * time.Second, wait: 3 * time.Second,
			handler: func(_ context.Context, s *hangingStore) error { s.hang.Store(true); panic("boom") },
			panics:  true,
		},
		{
			name: "heartbeat hanging", timeout: 3 * time.Second, wait: 15*time.Second + 3*time.Second,
			handler: func(_ context.Context, s *hangingStore) error {
				s.hang.Store(true)
				time.Sleep(15 * time.Second) // a heartbeat starts at 10 s and hangs
				return nil
			},
			want: consumer.Handled,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ms, err := memstore.New(memstore.Config{})
				if err != nil {
					t.Fatal(err)
				}
				s := &hangingStore{Store: ms}
				c, err := consumer.New(consumer.Config[msg]{
					Ledger:        consumer.StoreLedger(s, idem.MustNamespace("orders"), &consumer.StoreLedgerOpts{Lease: lease}),
					Key:           func(m msg) (string, error) { return m.ID, nil },
					Handle:        func(ctx context.Context, _ msg) error { return tc.handler(ctx, s) },
					SettleTimeout: tc.timeout,
				})
				if err != nil {
					t.Fatal(err)
				}
				type result struct {
					o     consumer.Outcome
					err   error
					panic any
				}
				done := make(chan result, 1)
				start := time.Now()
				go func() {
					var r result
					defer func() {
						r.panic = recover()
						done <- r
					}()
					r.o, r.err = c.Handle(context.Background(), msg{ID: "m"})
				}()
				r := <-done
				if took := time.Since(start); took != tc.wait {
					t.Errorf("Handle took %v with a hanging store, want %v", took, tc.wait)
				}
				if tc.panics {
					if r.panic != "boom" {
						t.Errorf("panic %v, want the handler's re-raised", r.panic)
					}
					return
				}
				if r.o != tc.want || !errors.Is(r.err, context.DeadlineExceeded) {
					t.Errorf("Handle = %s, %v; want %s and an error wrapping context.DeadlineExceeded", r.o, r.err, tc.want)
				}
			})
		})
	}
}

func TestSettleTimeoutMustNotBeNegative(t *testing.T) {
	s, _ := memstore.New(memstore.Config{})
	_, err := consumer.New(consumer.Config[msg]{
		Ledger:        consumer.StoreLedger(s, idem.MustNamespace("orders"), nil),
		Key:           func(m msg) (string, error) { return m.ID, nil },
		Handle:        func(context.Context, msg) error { return nil },
		SettleTimeout: -time.Second,
	})
	var ce *consumer.ConfigError
	if !errors.As(err, &ce) || ce.Field != "Config.SettleTimeout" {
		t.Fatalf("New with a negative SettleTimeout: %v, want a *ConfigError naming Config.SettleTimeout", err)
	}
	if want := "consumer: Config.SettleTimeout must not be negative, got -1s"; err.Error() != want {
		t.Errorf("error text %q, want %q", err, want)
	}
}
