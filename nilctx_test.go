package idem_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemgo/idem"
)

// TestNilContextIsAnInvalidArgument: a nil context (a programming error,
// as a nil Store is) makes Do fail and Owner.Run set Err with
// ErrInvalidArgument before anything runs, and makes KeepAlive report the
// lease lost at once, instead of a panic: in KeepAlive's case a panic on
// its timer's goroutine, which would end the process.
func TestNilContextIsAnInvalidArgument(t *testing.T) {
	var nilCtx context.Context
	s := newMem(t, nil)
	ran := false
	noPanic(t, "Do with a nil ctx", func() {
		k := testKey(t, "nil-ctx-do")
		_, err := idem.Do(nilCtx, s, k, "req", func(context.Context) (int, error) { ran = true; return 1, nil }, nil)
		if !errors.Is(err, idem.ErrInvalidArgument) {
			t.Errorf("Do with a nil ctx = %v, want ErrInvalidArgument", err)
		}
		if _, err := s.Get(context.Background(), k); !errors.Is(err, idem.ErrNotFound) {
			t.Errorf("Do with a nil ctx left a record: %v", err)
		}
	})
	k := testKey(t, "nil-ctx-owner")
	o := owned(t, s, k)
	noPanic(t, "Owner.Run with a nil ctx", func() {
		o.Run(nilCtx, func(context.Context) ([]byte, bool) { ran = true; return []byte(`1`), true })
		if !errors.Is(o.Err, idem.ErrInvalidArgument) || o.Recorded {
			t.Errorf("Owner.Run with a nil ctx: Err %v, Recorded %v; want ErrInvalidArgument", o.Err, o.Recorded)
		}
	})
	if ran {
		t.Error("a function ran with a nil ctx")
	}
	noPanic(t, "KeepAlive with a nil ctx", func() {
		lost := 0
		stop := idem.KeepAlive(nilCtx, s, k, o.Lease, time.Millisecond, func() { lost++ })
		stop()
		if lost != 1 {
			t.Errorf("KeepAlive with a nil ctx reported the loss %d times, want 1", lost)
		}
	})
}
