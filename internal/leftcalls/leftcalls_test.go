package leftcalls

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// Counter.Idle waits while a command is counted, returns when the count
// is back at 0, and loses no wake-up when calls and Drains race: 200
// rounds of 8 calls ending while 4 Drains wait each end every Drain.
func TestIdle(t *testing.T) {
	var l Counter
	ctx := context.Background()
	if err := l.Idle(ctx); err != nil {
		t.Fatalf("idle with nothing counted = %v, want nil at once", err)
	}
	l.Add()
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := l.Idle(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("idle with a call counted = %v, want its context's error", err)
	}
	l.Done()
	if err := l.Idle(ctx); err != nil {
		t.Fatalf("idle after the call ended = %v, want nil", err)
	}
	for round := range 200 {
		var calls, drains sync.WaitGroup
		for range 8 {
			l.Add()
			calls.Go(l.Done)
		}
		errs := make(chan error, 4)
		for range 4 {
			drains.Go(func() {
				ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				errs <- l.Idle(ctx)
			})
		}
		calls.Wait()
		drains.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("round %d: a Drain waiting while the calls ended = %v, want nil", round, err)
			}
		}
	}
}
