package backoff

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// TestRepeatWaits: the waits before the tries are 10, 20, 40… ms, at most
// 500 ms, until try is done.
func TestRepeatWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var at []time.Duration
		start := time.Now()
		done := Repeat(context.Background(), func() bool {
			at = append(at, time.Since(start))
			return len(at) == 8
		})
		want := []time.Duration{10, 30, 70, 150, 310, 630, 1130, 1630}
		for i := range want {
			want[i] *= time.Millisecond
		}
		if !done || len(at) != len(want) {
			t.Fatalf("Repeat = %v after tries at %v; want done after tries at %v", done, at, want)
		}
		for i := range want {
			if at[i] != want[i] {
				t.Errorf("try %d at %v, want %v", i+1, at[i], want[i])
			}
		}
	})
}

// TestRepeatEndsWithItsContext: once ctx ends, Repeat returns false
// without calling try again.
func TestRepeatEndsWithItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		tries := 0
		if Repeat(ctx, func() bool { tries++; return false }) {
			t.Fatal("Repeat reported done")
		}
		if tries != 3 { // at 10, 30 and 70 ms; the next would be at 150
			t.Errorf("%d tries before the context ended, want 3", tries)
		}
	})
}
