package idem_test

import (
	"context"
	"errors"
	"runtime"
	"testing"

	"github.com/idemgo/idem"
)

// goexitCommit is a store whose Commit ends its goroutine
// (runtime.Goexit), as a fake store calling t.FailNow would, without
// recording anything.
type goexitCommit struct{ idem.Store }

func (goexitCommit) Commit(context.Context, idem.Key, idem.Lease, []byte) error {
	runtime.Goexit()
	return nil
}

// TestSettleGoexitReleases: a Commit that ends the caller's goroutine
// (runtime.Goexit) instead of returning releases the key, as a Commit
// that panics does, in Do and in Owner.Run: a retry runs again at once
// instead of finding the key in flight until its lease lapses.
func TestSettleGoexitReleases(t *testing.T) {
	mem := newMem(t, nil)
	s := goexitCommit{mem}
	ctx := context.Background()
	inGoroutine := func(f func()) {
		done := make(chan struct{})
		go func() {
			defer close(done)
			f()
		}()
		<-done
	}

	k := testKey(t, "do-commit-goexit")
	inGoroutine(func() {
		_, _ = idem.Do(ctx, s, k, "req", func(context.Context) (int, error) { return 1, nil }, nil)
		t.Error("Do returned after its Commit ended the goroutine")
	})
	if rec, err := mem.Get(ctx, k); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("Do whose Commit ended the goroutine left %+v, %v; want the key released", rec, err)
	}

	k = testKey(t, "owner-commit-goexit")
	o := owned(t, mem, k)
	o.Store = s
	inGoroutine(func() {
		o.Run(ctx, func(context.Context) ([]byte, bool) { return []byte(`1`), true })
		t.Error("Owner.Run returned after its Commit ended the goroutine")
	})
	if rec, err := mem.Get(ctx, k); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("Owner.Run whose Commit ended the goroutine left %+v, %v; want the key released", rec, err)
	}
}
