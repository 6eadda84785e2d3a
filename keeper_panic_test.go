package idem_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemgo/idem"
)

// panickyHeartbeats is a store whose Heartbeat panics, as a buggy store or
// a wrapper of one might.
type panickyHeartbeats struct{ idem.Store }

func (panickyHeartbeats) Heartbeat(context.Context, idem.Key, idem.Lease, time.Duration) (idem.Lease, error) {
	panic("heartbeat exploded")
}

// checkHeartbeatPanic fails t unless err reports the heartbeat's panic: a
// *PanicError with the panic's value and a stack, and a lost lease.
func checkHeartbeatPanic(t *testing.T, what string, err error) {
	t.Helper()
	pe, ok := errors.AsType[*idem.PanicError](err)
	if !ok {
		t.Fatalf("%s = %v, want a *idem.PanicError", what, err)
	}
	if pe.Value != "heartbeat exploded" || len(pe.Stack) == 0 || pe.Op != "Store.Heartbeat" {
		t.Errorf("%s: PanicError{Op %q, Value %v, %d bytes of stack}, want the heartbeat's panic and its stack", what, pe.Op, pe.Value, len(pe.Stack))
	}
	if !errors.Is(err, idem.ErrLeaseLost) {
		t.Errorf("%s = %v, want it to wrap ErrLeaseLost too", what, err)
	}
}

// waitCancelled waits for ctx to be done, and fails t if it is not within
// 10 seconds.
func waitCancelled(t *testing.T, ctx context.Context) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Error("the run's context was not cancelled after the heartbeat panicked")
	}
}

// TestOwnerHeartbeatPanicIsReported: a Store whose Heartbeat panics does
// not crash the process from the heartbeat's goroutine. The run counts its
// lease as lost: work's context is cancelled with a cause carrying the
// panic (ErrLeaseLost and a *PanicError), Run records nothing, releases the
// key and reports the panic in Err, and no goroutine is left behind.
func TestOwnerHeartbeatPanicIsReported(t *testing.T) {
	mem := newMem(t, nil)
	s := panickyHeartbeats{mem}
	k := testKey(t, "owner-heartbeat-panic")
	b, err := s.Begin(context.Background(), k, mustRequest(t, `"req"`), &idem.BeginOpts{Lease: 30 * time.Millisecond})
	if err != nil || b.Kind != idem.Fresh {
		t.Fatalf("Begin = %+v, %v", b, err)
	}
	o := idem.Owner{Store: s, Key: k, Lease: b.Lease}
	var cause error
	o.Run(context.Background(), func(ctx context.Context) ([]byte, bool) {
		waitCancelled(t, ctx)
		cause = context.Cause(ctx)
		return []byte(`1`), true
	})
	checkHeartbeatPanic(t, "the cause of work's cancellation", cause)
	checkHeartbeatPanic(t, "Owner.Err", o.Err)
	if o.Recorded {
		t.Error("Recorded after the heartbeat panicked, want the key released")
	}
	if _, err := mem.Get(context.Background(), k); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("Get after Run = %v, want ErrNotFound (the key released)", err)
	}
}

// TestDoHeartbeatPanicIsReported: as for Owner.Run, a panicking Heartbeat
// under Do cancels fn's context with a cause carrying the panic, and Do
// commits nothing, releases the key and returns fn's result with an error
// carrying the panic.
func TestDoHeartbeatPanicIsReported(t *testing.T) {
	mem := newMem(t, nil)
	s := panickyHeartbeats{mem}
	k := testKey(t, "do-heartbeat-panic")
	var cause error
	opts := &idem.DoOpts{Begin: &idem.BeginOpts{Lease: time.Hour}, HeartbeatEvery: time.Millisecond}
	res, err := idem.Do(context.Background(), s, k, "req", func(ctx context.Context) (int, error) {
		waitCancelled(t, ctx)
		cause = context.Cause(ctx)
		return 7, nil
	}, opts)
	checkHeartbeatPanic(t, "the cause of fn's cancellation", cause)
	checkHeartbeatPanic(t, "Do's error", err)
	if res != 7 {
		t.Errorf("Do's result = %d, want fn's, 7", res)
	}
	if _, err := mem.Get(context.Background(), k); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("Get after Do = %v, want ErrNotFound (the key released)", err)
	}
}

// TestKeepAliveHeartbeatPanic: under KeepAlive, a panicking Heartbeat
// counts as a lost lease (lost is called) and the panic is raised again,
// as a *PanicError, by stop, on the caller's goroutine, where it can be
// recovered; a second stop does nothing.
func TestKeepAliveHeartbeatPanic(t *testing.T) {
	s := panickyHeartbeats{newMem(t, nil)}
	k := testKey(t, "keepalive-heartbeat-panic")
	b, err := s.Begin(context.Background(), k, mustRequest(t, `"req"`), &idem.BeginOpts{Lease: time.Hour})
	if err != nil || b.Kind != idem.Fresh {
		t.Fatalf("Begin = %+v, %v", b, err)
	}
	lost := make(chan struct{})
	stop := idem.KeepAlive(context.Background(), s, k, b.Lease, time.Millisecond, func() { close(lost) })
	select {
	case <-lost:
	case <-time.After(10 * time.Second):
		t.Fatal("lost was not called after the heartbeat panicked")
	}
	p := recoverFrom(stop)
	pe, ok := p.(*idem.PanicError)
	if !ok || pe.Value != "heartbeat exploded" || pe.Op != "Store.Heartbeat" || len(pe.Stack) == 0 {
		t.Fatalf("stop panicked with %#v, want a *PanicError with the heartbeat's panic", p)
	}
	if p := recoverFrom(stop); p != nil {
		t.Errorf("a second stop panicked with %v, want nothing", p)
	}
}

// TestKeepAliveLostPanic: a lost callback that panics does not crash the
// process from the heartbeat's goroutine: stop raises the panic again, as a
// *PanicError, on the caller's goroutine.
func TestKeepAliveLostPanic(t *testing.T) {
	s := leaseLostHeartbeats{newMem(t, nil)}
	k := testKey(t, "keepalive-lost-panic")
	b, err := s.Begin(context.Background(), k, mustRequest(t, `"req"`), &idem.BeginOpts{Lease: time.Hour})
	if err != nil || b.Kind != idem.Fresh {
		t.Fatalf("Begin = %+v, %v", b, err)
	}
	called := make(chan struct{})
	stop := idem.KeepAlive(context.Background(), s, k, b.Lease, time.Millisecond, func() {
		close(called)
		panic("lost exploded")
	})
	select {
	case <-called:
	case <-time.After(10 * time.Second):
		t.Fatal("lost was not called")
	}
	p := recoverFrom(stop)
	pe, ok := p.(*idem.PanicError)
	if !ok || pe.Value != "lost exploded" || len(pe.Stack) == 0 {
		t.Fatalf("stop panicked with %#v, want a *PanicError with lost's panic", p)
	}
}

// recoverFrom calls f and returns what it panicked with, or nil.
func recoverFrom(f func()) (p any) {
	defer func() { p = recover() }()
	f()
	return nil
}
