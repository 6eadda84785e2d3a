package idem_test

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/idemgo/idem"
)

// goexitHeartbeats is a store whose Heartbeat ends its goroutine
// (runtime.Goexit), as a fake store calling t.FailNow would.
type goexitHeartbeats struct{ idem.Store }

func (goexitHeartbeats) Heartbeat(context.Context, idem.Key, idem.Lease, time.Duration) (idem.Lease, error) {
	runtime.Goexit()
	return idem.Lease{}, nil
}

// TestDoHeartbeatGoexitIsReported: a Heartbeat that ends its goroutine
// (runtime.Goexit) does not leave Do waiting for a beat that never ends:
// it counts as a lost lease, fn's context is cancelled, Do returns with an
// error carrying ErrLeaseLost and a *PanicError, and the key is released.
func TestDoHeartbeatGoexitIsReported(t *testing.T) {
	mem := newMem(t, nil)
	s := goexitHeartbeats{mem}
	k := testKey(t, "do-heartbeat-goexit")
	done := make(chan error, 1)
	go func() {
		opts := &idem.DoOpts{Begin: &idem.BeginOpts{Lease: time.Hour}, HeartbeatEvery: time.Millisecond}
		_, err := idem.Do(context.Background(), s, k, "req", func(ctx context.Context) (int, error) {
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Second):
			}
			return 7, nil
		}, opts)
		done <- err
	}()
	select {
	case err := <-done:
		if _, ok := errors.AsType[*idem.PanicError](err); !ok || !errors.Is(err, idem.ErrLeaseLost) {
			t.Errorf("Do's error = %v, want ErrLeaseLost and a *PanicError", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Do did not return: it waits for a heartbeat whose goroutine ended")
	}
	if _, err := mem.Get(context.Background(), k); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("Get after Do = %v, want ErrNotFound (the key released)", err)
	}
}

// TestKeepAliveLostGoexitIsReported: a lost callback that ends its
// goroutine (runtime.Goexit, as t.FailNow called from it does) does not
// leave stop waiting for a beat that never ends: stop returns, raising a
// *PanicError for lost, as for a lost that panics; or the Heartbeat's,
// when a Heartbeat that panicked lost the lease.
func TestKeepAliveLostGoexitIsReported(t *testing.T) {
	for _, tc := range []struct {
		name   string
		wrap   func(idem.Store) idem.Store
		wantOp string
	}{
		{"lease lost", func(s idem.Store) idem.Store { return leaseLostHeartbeats{s} }, "KeepAlive's lost"},
		{"heartbeat panicked", func(s idem.Store) idem.Store { return panickyHeartbeats{s} }, "Store.Heartbeat"},
		{"heartbeat ended its goroutine", func(s idem.Store) idem.Store { return goexitHeartbeats{s} }, "Store.Heartbeat"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := newMem(t, nil)
			k := testKey(t, "keepalive-lost-goexit")
			b, err := mem.Begin(context.Background(), k, mustRequest(t, `"req"`), &idem.BeginOpts{Lease: time.Hour})
			if err != nil || b.Kind != idem.Fresh {
				t.Fatalf("Begin = %+v, %v", b, err)
			}
			called := make(chan struct{})
			stop := idem.KeepAlive(context.Background(), tc.wrap(mem), k, b.Lease, time.Millisecond, func() {
				close(called)
				runtime.Goexit()
			})
			select {
			case <-called:
			case <-time.After(10 * time.Second):
				t.Fatal("lost was not called")
			}
			stopped := make(chan any, 1)
			go func() { stopped <- recoverFrom(stop) }()
			select {
			case p := <-stopped:
				pe, ok := p.(*idem.PanicError)
				if !ok || pe.Op != tc.wantOp || len(pe.Stack) == 0 {
					t.Fatalf("stop panicked with %#v, want a *PanicError of %s", p, tc.wantOp)
				}
			case <-time.After(15 * time.Second):
				t.Fatal("stop did not return: it waits for a beat whose goroutine ended in lost")
			}
		})
	}
}
