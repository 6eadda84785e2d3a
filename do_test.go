package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
	"github.com/idemgo/idem/store/memstore"
)

func newMem(t *testing.T, now func() time.Time) *memstore.Store {
	t.Helper()
	s, err := memstore.New(memstore.Config{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func testKey(t *testing.T, v string) idem.Key {
	t.Helper()
	k, err := idem.ParseKey(idem.MustNamespace("test"), v)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestDoPanicReleasesKey(t *testing.T) {
	s := newMem(t, nil)
	k := testKey(t, "panic")
	func() {
		defer func() {
			if p := recover(); p != "kaboom" {
				t.Fatalf("recovered %v, want the handler's panic", p)
			}
		}()
		_, _ = idem.Do(context.Background(), s, k, "req", func(context.Context) (int, error) { panic("kaboom") }, nil)
	}()
	if _, err := s.Get(context.Background(), k); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("after a panic the key is still held: %v", err)
	}
	n, err := idem.Do(context.Background(), s, k, "req", func(context.Context) (int, error) { return 7, nil }, nil)
	if err != nil || n != 7 {
		t.Fatalf("retry after a panic = %d, %v", n, err)
	}
}

func TestDoMismatchAndInFlight(t *testing.T) {
	s := newMem(t, nil)
	k := testKey(t, "m")
	ctx := context.Background()
	if _, err := idem.Do(ctx, s, k, "a", func(context.Context) (int, error) { return 1, nil }, nil); err != nil {
		t.Fatal(err)
	}
	_, err := idem.Do(ctx, s, k, "b", func(context.Context) (int, error) {
		t.Error("ran for a mismatched request")
		return 0, nil
	}, nil)
	var me *idem.MismatchError
	if !errors.As(err, &me) || !errors.Is(err, idem.ErrMismatch) {
		t.Fatalf("Do with another request = %v, want *MismatchError", err)
	}

	k2 := testKey(t, "inflight")
	o, err := s.Begin(ctx, k2, mustRequest(t, `"a"`), nil)
	if err != nil || o.Kind != idem.Fresh {
		t.Fatal(o, err)
	}
	_, err = idem.Do(ctx, s, k2, "a", func(context.Context) (int, error) {
		t.Error("ran while in flight")
		return 0, nil
	}, nil)
	var ife *idem.InFlightError
	if !errors.As(err, &ife) || ife.RetryAfter <= 0 {
		t.Fatalf("Do while in flight = %v, want *InFlightError with a retry hint", err)
	}
}

// TestDoLeaseLostCancelsRun: when the lease lapses and another caller takes
// the key over, the heartbeat finds out and cancels fn's context with
// ErrLeaseLost; the late result is not recorded over the new owner's.
func TestDoLeaseLostCancelsRun(t *testing.T) {
	clock := idemtest.NewClock()
	s := newMem(t, clock.Now)
	k := testKey(t, "lost")
	ctx := context.Background()
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := idem.Do(ctx, s, k, "a", func(ctx context.Context) (int, error) {
			close(started)
			<-ctx.Done()
			if !errors.Is(context.Cause(ctx), idem.ErrLeaseLost) {
				t.Errorf("cause = %v, want ErrLeaseLost", context.Cause(ctx))
			}
			return 1, nil
		}, &idem.DoOpts{HeartbeatEvery: time.Millisecond})
		done <- err
	}()
	<-started
	clock.Advance(idem.DefaultLease + time.Second)
	o, err := s.Begin(ctx, k, mustRequest(t, `"a"`), nil)
	if err != nil || o.Kind != idem.Fresh || !o.TakenOver {
		t.Fatalf("takeover = %+v, %v", o, err)
	}
	if err := <-done; !errors.Is(err, idem.ErrStaleToken) {
		t.Fatalf("Do after losing the lease = %v, want ErrStaleToken (result not recorded)", err)
	}
	if err := s.Commit(ctx, k, o.Lease, []byte(`2`)); err != nil {
		t.Fatalf("new owner's commit: %v", err)
	}
}

func TestDoHeartbeatKeepsLease(t *testing.T) {
	clock := idemtest.NewClock()
	s := newMem(t, clock.Now)
	k := testKey(t, "beat")
	ctx := context.Background()
	beats := make(chan struct{})
	_, err := idem.Do(ctx, s, k, "a", func(ctx context.Context) (int, error) {
		for range 3 {
			clock.Advance(idem.DefaultLease / 2)
			// Wait until a heartbeat has extended the lease past now.
			for {
				rec, err := s.Get(ctx, k)
				if err != nil {
					return 0, err
				}
				if rec.LeaseExpiresAt.After(clock.Now().Add(idem.DefaultLease / 2)) {
					break
				}
				time.Sleep(time.Millisecond)
			}
			if o, _ := s.Begin(ctx, k, mustRequest(t, `"a"`), nil); o.Kind != idem.InFlight {
				t.Errorf("Begin while running = %s, want in_flight", o.Kind)
			}
		}
		close(beats)
		return 1, nil
	}, &idem.DoOpts{HeartbeatEvery: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	<-beats
}

func TestDoRecordsAfterCallerCancels(t *testing.T) {
	s := newMem(t, nil)
	k := testKey(t, "cancel")
	ctx, cancel := context.WithCancel(context.Background())
	n, err := idem.Do(ctx, s, k, "a", func(context.Context) (int, error) {
		cancel() // the client went away; the work finished anyway
		return 5, nil
	}, nil)
	if err != nil || n != 5 {
		t.Fatalf("Do = %d, %v", n, err)
	}
	rec, err := s.Get(context.Background(), k)
	if err != nil || rec.Status != idem.StatusCommitted {
		t.Fatalf("record after the caller cancelled: %+v, %v; want committed", rec, err)
	}
}

func mustRequest(t *testing.T, payload string) idem.Request {
	t.Helper()
	r, err := idem.NewRequest([]byte(payload))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// txStore stands in for a store bound to a transaction: it counts
// heartbeats, which must never come.
type txStore struct {
	idem.Store
	beats atomic.Int32
}

func (s *txStore) TxBound() bool { return true }

func (s *txStore) Heartbeat(ctx context.Context, k idem.Key, l idem.Lease, d time.Duration) (idem.Lease, error) {
	s.beats.Add(1)
	return s.Store.Heartbeat(ctx, k, l, d)
}

func TestDoNeverExtendsTxBoundStores(t *testing.T) {
	inner := newMem(t, nil)
	s := &txStore{Store: inner}
	plain := &txStore{Store: inner} // same counting, but not TxBound
	for _, tc := range []struct {
		name  string
		store idem.Store
		beats func() int32
		want  bool
	}{
		{"tx-bound", s, s.beats.Load, false},
		{"lease mode", struct{ idem.Store }{plain}, plain.beats.Load, true},
	} {
		_, err := idem.Do(context.Background(), tc.store, testKey(t, "tx-"+tc.name), "r", func(context.Context) (int, error) {
			if !tc.want {
				time.Sleep(30 * time.Millisecond) // thirty heartbeats' time
				return 1, nil
			}
			// A loaded machine may run the first beat late: wait for it,
			// up to 10 s, rather than a fixed time.
			for deadline := time.Now().Add(10 * time.Second); tc.beats() == 0 && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
			return 1, nil
		}, &idem.DoOpts{HeartbeatEvery: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if got := tc.beats() > 0; got != tc.want {
			t.Errorf("%s: heartbeats sent = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A panic while Do records its result (here, in encoding it) comes after
// the run's lease keeper went back to the pool, where another run may have
// taken it: the panic must not stop that keeper again, which would let the
// other run's key be taken over while it still runs.
func TestDoPanicWhileRecordingLeavesOtherRunsKeeperAlone(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1)) // one P: the pool hands the keeper straight on
	s := newHeartbeatWatch(t)
	s.extend = time.Second // a loaded machine delaying beats loses no lease
	ctx := context.Background()
	other, panics := testKey(t, "other"), testKey(t, "panics")
	s.set(other, true)
	s.set(panics, true)
	running, checked, otherDone := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	opts := &idem.DoOpts{Begin: &idem.BeginOpts{Lease: time.Second}, HeartbeatEvery: 20 * time.Millisecond}
	marshal := func(v any) ([]byte, error) {
		if v != 42 {
			return json.Marshal(v)
		}
		go func() {
			_, err := idem.Do(ctx, s, other, "req", func(ctx context.Context) (int, error) {
				close(running)
				select {
				case <-checked:
				case <-ctx.Done():
				}
				return 1, context.Cause(ctx)
			}, opts)
			otherDone <- err
		}()
		<-running
		panic("encoding failed")
	}
	func() {
		defer func() {
			if p := recover(); p != "encoding failed" {
				t.Errorf("Do panicked with %v, want the encoder's panic", p)
			}
		}()
		popts := *opts
		popts.Typed = &idem.TypedOpts{Marshal: marshal}
		_, _ = idem.Do(ctx, s, panics, "req", func(context.Context) (int, error) { return 42, nil }, &popts)
	}()
	waitBeats(t, s, other, 5)
	req, err := idem.NewRequest([]byte(`"req"`))
	if err != nil {
		t.Fatal(err)
	}
	o, err := s.Begin(ctx, other, req, nil)
	close(checked)
	if err != nil || o.Kind != idem.InFlight {
		t.Errorf("Begin of the other, running key = %v, %v; want in_flight (its lease kept)", o.Kind, err)
	}
	if err := <-otherDone; err != nil {
		t.Errorf("the other run: %v", err)
	}
}

// fn leaving by runtime.Goexit (t.FailNow does) releases the key, as a
// panic does.
func TestDoGoexitReleases(t *testing.T) {
	s := newMem(t, nil)
	k := testKey(t, "goexit")
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		_, _ = idem.Do(context.Background(), s, k, "req", func(context.Context) (int, error) {
			runtime.Goexit()
			return 0, nil
		}, nil)
	}()
	<-exited
	ran := false
	if _, err := idem.Do(context.Background(), s, k, "req", func(context.Context) (int, error) { ran = true; return 1, nil }, nil); err != nil || !ran {
		t.Fatalf("Do after fn exited: %v, ran %v; want it to run", err, ran)
	}
}

// A result that cannot be recorded (it does not encode, or is too large)
// frees the key: a retry runs fn again rather than waiting out the lease.
func TestDoUnrecordableResultFreesTheKey(t *testing.T) {
	s, err := memstore.New(memstore.Config{MaxPayload: 64})
	if err != nil {
		t.Fatal(err)
	}
	for name, res := range map[string]any{"does not encode": math.NaN(), "too large": strings.Repeat("x", 100)} {
		k := testKey(t, "unrecordable-"+strings.ReplaceAll(name, " ", "-"))
		runs := 0
		for i := range 2 {
			_, err := idem.Do(context.Background(), s, k, "req", func(context.Context) (any, error) { runs++; return res, nil }, nil)
			if err == nil || errors.Is(err, idem.ErrInFlight) {
				t.Errorf("%s, call %d: Do = %v, want the recording error", name, i, err)
			}
		}
		if runs != 2 {
			t.Errorf("%s: fn ran %d times, want 2 (the key freed after the first)", name, runs)
		}
	}
}

// The *MismatchError Do returns carries the recorded request.
func TestDoMismatchCarriesTheRecordedRequest(t *testing.T) {
	s := newMem(t, nil)
	k := testKey(t, "mismatch")
	if _, err := idem.Do(context.Background(), s, k, map[string]int{"amount": 1}, func(context.Context) (int, error) { return 1, nil }, nil); err != nil {
		t.Fatal(err)
	}
	_, err := idem.Do(context.Background(), s, k, map[string]int{"amount": 2}, func(context.Context) (int, error) { return 2, nil }, nil)
	var me *idem.MismatchError
	if !errors.As(err, &me) || string(me.RecordedRequest) != `{"amount":1}` {
		t.Fatalf("Do with another request = %v (recorded %q), want a *MismatchError with {\"amount\":1}", err, func() []byte {
			if me != nil {
				return me.RecordedRequest
			}
			return nil
		}())
	}
}

// A permanent failure that cannot be recorded (its error is too large)
// frees the key too: a retry runs fn again.
func TestDoUnrecordableFailureFreesTheKey(t *testing.T) {
	s, err := memstore.New(memstore.Config{MaxPayload: 256})
	if err != nil {
		t.Fatal(err)
	}
	k := testKey(t, "unrecordable-failure")
	runs := 0
	for i := range 2 {
		_, err := idem.Do(context.Background(), s, k, "req", func(context.Context) (int, error) {
			runs++
			return 0, idem.Permanent("declined", errors.New(strings.Repeat("x", 1000)))
		}, nil)
		if err == nil || errors.Is(err, idem.ErrInFlight) {
			t.Errorf("call %d: Do = %v, want the failure and the recording error", i, err)
		}
	}
	if runs != 2 {
		t.Errorf("fn ran %d times, want 2 (the key freed after the first)", runs)
	}
}
