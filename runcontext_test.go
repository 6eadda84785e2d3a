package idem_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
	"github.com/idemgo/idem/store/memstore"
)

type ctxKey struct{}

// runOnce runs an Owner with parent and returns the context its work was
// given. The result must be recorded unless the parent is cancelled.
func runOnce(t *testing.T, parent context.Context, work func(ctx context.Context)) context.Context {
	t.Helper()
	o := owned(t, newMem(t, nil), testKey(t, "ctx"))
	var got context.Context
	o.Run(parent, func(ctx context.Context) ([]byte, bool) {
		got = ctx
		if work != nil {
			work(ctx)
		}
		return []byte(`1`), true
	})
	if !o.Recorded && parent.Err() == nil {
		t.Fatalf("not recorded: %v", o.Err)
	}
	return got
}

// A work context nobody watched during the run behaves, once Run returned,
// like a cancelled context.WithCancelCause: Done closed, Err and Cause
// Canceled, the parent's values still there.
func TestOwnerRunContextUnwatchedIsCancelledAfterRun(t *testing.T) {
	parent := context.WithValue(context.WithoutCancel(context.Background()), ctxKey{}, "v")
	var during error
	ctx := runOnce(t, parent, func(ctx context.Context) { during = ctx.Err() })
	if during != nil {
		t.Errorf("Err during the run = %v, want nil", during)
	}
	if !errors.Is(ctx.Err(), context.Canceled) || !errors.Is(context.Cause(ctx), context.Canceled) {
		t.Errorf("after Run: Err %v Cause %v, want Canceled", ctx.Err(), context.Cause(ctx))
	}
	select {
	case <-ctx.Done():
	default:
		t.Error("Done not closed after Run")
	}
	if ctx.Value(ctxKey{}) != "v" {
		t.Errorf("Value = %v, want the parent's", ctx.Value(ctxKey{}))
	}
	if _, ok := ctx.Deadline(); ok {
		t.Error("the work context has a deadline its parent lacks")
	}
}

// Contexts derived from the work context during the run are cancelled when
// Run returns, and a context.AfterFunc registered on it runs.
func TestOwnerRunContextChildrenEndWithRun(t *testing.T) {
	var child context.Context
	var cancelChild context.CancelFunc
	fired := make(chan struct{})
	runOnce(t, context.WithoutCancel(context.Background()), func(ctx context.Context) {
		child, cancelChild = context.WithTimeout(ctx, time.Hour)
		context.AfterFunc(ctx, func() { close(fired) })
		if child.Err() != nil {
			t.Errorf("child cancelled during the run: %v", child.Err())
		}
	})
	select {
	case <-child.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("child not cancelled when Run returned")
	}
	if !errors.Is(child.Err(), context.Canceled) {
		t.Errorf("child Err = %v, want Canceled", child.Err())
	}
	cancelChild()
	select {
	case <-fired:
	case <-time.After(5 * time.Second):
		t.Fatal("AfterFunc not called when Run returned")
	}
}

// A parent that can be cancelled cancels the work's context, with its cause.
func TestOwnerRunContextFollowsCancellableParent(t *testing.T) {
	parent, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	stop := errors.New("caller gave up")
	runOnce(t, parent, func(ctx context.Context) {
		cancel(stop)
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("parent's cancellation did not reach the work")
		}
		if !errors.Is(context.Cause(ctx), stop) {
			t.Errorf("Cause = %v, want the parent's cause", context.Cause(ctx))
		}
	})
}

// A lost lease reaches a context derived from the work's context before it
// was lost, with cause ErrLeaseLost, even though the work never called Done
// on its own context.
func TestOwnerRunContextLeaseLostReachesChildren(t *testing.T) {
	clock := idemtest.NewClock()
	s, err := memstore.New(memstore.Config{Now: clock.Now, Lease: 30 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	k := testKey(t, "lost-child")
	o := owned(t, s, k)
	o.Run(context.WithoutCancel(context.Background()), func(ctx context.Context) ([]byte, bool) {
		child, cancel := context.WithCancel(ctx)
		defer cancel()
		clock.Advance(time.Second)
		if b, err := s.Begin(context.Background(), k, mustRequest(t, `"req"`), nil); err != nil || !b.TakenOver {
			t.Fatalf("takeover = %+v, %v", b, err)
		}
		select {
		case <-child.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("lost lease did not reach the child")
		}
		if !errors.Is(context.Cause(child), idem.ErrLeaseLost) || !errors.Is(context.Cause(ctx), idem.ErrLeaseLost) {
			t.Errorf("Cause child %v, work %v; want ErrLeaseLost", context.Cause(child), context.Cause(ctx))
		}
		if !errors.Is(ctx.Err(), context.Canceled) {
			t.Errorf("Err = %v, want Canceled", ctx.Err())
		}
		return []byte(`1`), true
	})
	if o.Recorded {
		t.Error("recorded after losing the lease")
	}
}

// Watching the context from other goroutines while Run returns is safe
// (run with -race) and every watcher sees the cancellation.
func TestOwnerRunContextConcurrentWatchers(t *testing.T) {
	for range 50 {
		var wg sync.WaitGroup
		start := make(chan struct{})
		runOnce(t, context.WithoutCancel(context.Background()), func(ctx context.Context) {
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					select {
					case <-ctx.Done():
					case <-time.After(5 * time.Second):
						t.Error("watcher not woken")
					}
					if ctx.Err() == nil || context.Cause(ctx) == nil {
						t.Error("Done closed but Err or Cause nil")
					}
				}()
			}
			close(start)
		})
		wg.Wait()
	}
}

// BenchmarkOwnerRun is a run whose work does nothing, on memstore: the
// cost of owning a reservation, beside Begin and Commit.
func BenchmarkOwnerRun(b *testing.B) {
	s, err := memstore.New(memstore.Config{})
	if err != nil {
		b.Fatal(err)
	}
	req, err := idem.NewRequest([]byte(`1`))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.WithoutCancel(context.Background())
	work := func(context.Context) ([]byte, bool) { return []byte(`1`), true }
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		k, err := idem.ParseKey(idem.MustNamespace("bench"), "k"+string(rune('a'+i%26))+time.Duration(i).String())
		if err != nil {
			b.Fatal(err)
		}
		o, err := s.Begin(ctx, k, req, nil)
		if err != nil {
			b.Fatal(err)
		}
		own := idem.Owner{Store: s, Key: k, Lease: o.Lease}
		own.Run(ctx, work)
	}
}
