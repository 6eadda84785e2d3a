package durable_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/idemgo/idem/durable"
)

// waitResult is what a Wait run in a goroutine returned.
type waitResult struct {
	in  *durable.Instance
	err error
}

// goWait runs c.Wait(id) in a goroutine and returns the channel its result
// arrives on.
func goWait(t *testing.T, c *durable.Client, id int64) <-chan waitResult {
	t.Helper()
	ch := make(chan waitResult, 1)
	ctx := ctxT(t)
	go func() {
		in, err := c.Wait(ctx, id)
		ch <- waitResult{in, err}
	}()
	return ch
}

// receive returns the result of a Wait, failing t if none comes within 20 s.
func receive(t *testing.T, ch <-chan waitResult) waitResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(20 * time.Second):
		t.Fatal("Wait did not return")
		return waitResult{}
	}
}

// waitingOnLive starts an engine running ctl, inserts an instance that
// parks awaiting a signal, and starts a Wait for it on a producer-only
// client (never started). It checks that the Wait has not returned while
// the instance is live.
func waitingOnLive(t *testing.T) (*testBundle, int64, <-chan waitResult) {
	t.Helper()
	b := setup(t, fast(ctlFSM(t)))
	b.start(t)
	producer := newClient(t, b.pool, nil, &recorder{})
	id := b.insert(t, ctlFSM(t).With(ctlState{}), nil)
	ch := goWait(t, producer, id)
	b.waitStatus(t, id, durable.StatusAwaitingSignal)
	select {
	case r := <-ch:
		t.Fatalf("Wait returned %+v, %v while the instance is live", r.in, r.err)
	default:
	}
	return b, id, ch
}

// Wait returns an instance that completes as done, with its result, once
// it has completed, on a client that was never started.
func TestWaitReturnsACompletedInstance(t *testing.T) {
	t.Parallel()
	b, id, ch := waitingOnLive(t)
	b.signal(t, durable.ByID(id), "finish", map[string]int{"n": 7}, "")
	r := receive(t, ch)
	if r.err != nil {
		t.Fatalf("Wait: %v", r.err)
	}
	if r.in.ID != id || r.in.Status != durable.StatusDone || string(r.in.Result) != `{"n": 7}` {
		t.Errorf("Wait returned instance %d %s with result %s, want %d done with {\"n\": 7}", r.in.ID, r.in.Status, r.in.Result, id)
	}
	if r.in.FinishedAt.IsZero() {
		t.Error("the instance Wait returned has no FinishedAt")
	}
}

// Wait returns an instance that a step fails, with its error, once it has
// failed.
func TestWaitReturnsAFailedInstance(t *testing.T) {
	t.Parallel()
	b, id, ch := waitingOnLive(t)
	b.signal(t, durable.ByID(id), "fail", nil, "")
	r := receive(t, ch)
	if r.err != nil {
		t.Fatalf("Wait: %v", r.err)
	}
	if r.in.Status != durable.StatusFailed || r.in.Error != "failed by signal" {
		t.Errorf("Wait returned %s with error %q, want failed with \"failed by signal\"", r.in.Status, r.in.Error)
	}
}

// Wait returns an instance that Client.Cancel cancels, with the reason,
// once it is cancelled; neither the waiting client nor any other runs an
// engine.
func TestWaitReturnsACancelledInstance(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	id := b.insert(t, ctlFSM(t).With(ctlState{}), nil)
	ch := goWait(t, b.client, id)
	if in := b.get(t, id); in.Status != durable.StatusRunnable {
		t.Fatalf("instance is %s, want runnable (no engine runs)", in.Status)
	}
	select {
	case r := <-ch:
		t.Fatalf("Wait returned %+v, %v while the instance is runnable", r.in, r.err)
	default:
	}
	if err := b.client.Cancel(ctxT(t), durable.ByID(id), "no longer wanted"); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	r := receive(t, ch)
	if r.err != nil {
		t.Fatalf("Wait: %v", r.err)
	}
	if r.in.Status != durable.StatusCancelled || r.in.Error != "no longer wanted" {
		t.Errorf("Wait returned %s with error %q, want cancelled with the reason", r.in.Status, r.in.Error)
	}
}

// Wait on an instance that has already ended returns it, as Get reads it.
func TestWaitReturnsAnEndedInstanceAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	id := b.insert(t, ctlFSM(t).With(ctlState{}), nil)
	if err := b.client.Cancel(ctxT(t), durable.ByID(id), "ended"); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	want := b.get(t, id)
	// A single poll fits well within the deadline; a Wait that slept
	// before it, or did not see the end, would not return.
	ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
	defer cancel()
	in, err := b.client.Wait(ctx, id)
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if in.Status != durable.StatusCancelled || !in.UpdatedAt.Equal(want.UpdatedAt) || in.Error != want.Error {
		t.Errorf("Wait returned %+v, want %+v", in, want)
	}
}

// Wait for an id that no row has returns ErrNotFound, at once.
func TestWaitUnknownIDIsNotFound(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	for _, id := range []int64{0, -1, 1 << 50} {
		in, err := b.client.Wait(ctxT(t), id)
		if !errors.Is(err, durable.ErrNotFound) || in != nil {
			t.Errorf("Wait(%d) = %v, %v, want ErrNotFound", id, in, err)
		}
	}
}

// Wait returns ctx's error, and no instance, when ctx ends before the
// instance does; a ctx that has already ended fails it at once.
func TestWaitReturnsContextError(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	id := b.insert(t, ctlFSM(t).With(ctlState{}), nil)

	ctx, cancel := context.WithTimeout(ctxT(t), 150*time.Millisecond)
	defer cancel()
	in, err := b.client.Wait(ctx, id)
	if err != ctx.Err() || !errors.Is(err, context.DeadlineExceeded) || in != nil {
		t.Errorf("Wait past the deadline = %v, %v, want nil, ctx.Err() (%v)", in, err, ctx.Err())
	}

	ctx, cancel = context.WithCancel(ctxT(t))
	cancel()
	in, err = b.client.Wait(ctx, id)
	if err != context.Canceled || in != nil {
		t.Errorf("Wait with a cancelled ctx = %v, %v, want nil, context.Canceled", in, err)
	}
	if in := b.get(t, id); in.Status != durable.StatusRunnable {
		t.Errorf("instance is %s after the Waits, want runnable", in.Status)
	}
}

// Many concurrent Waits on one instance, on the engine's client and on a
// producer-only one, all return it once it ends.
func TestWaitManyWaitersOnOneInstance(t *testing.T) {
	t.Parallel()
	b := setup(t, fast(ctlFSM(t)))
	b.start(t)
	producer := newClient(t, b.pool, nil, &recorder{})
	id := b.insert(t, ctlFSM(t).With(ctlState{}), nil)

	const waiters = 40
	results := make(chan waitResult, waiters)
	ctx := ctxT(t)
	var wg sync.WaitGroup
	for i := range waiters {
		c := b.client
		if i%2 == 1 {
			c = producer
		}
		wg.Go(func() {
			in, err := c.Wait(ctx, id)
			results <- waitResult{in, err}
		})
	}
	b.waitStatus(t, id, durable.StatusAwaitingSignal)
	b.signal(t, durable.ByID(id), "finish", "all", "")
	wg.Wait()
	close(results)
	n := 0
	for r := range results {
		n++
		if r.err != nil {
			t.Errorf("Wait: %v", r.err)
			continue
		}
		if r.in.Status != durable.StatusDone || string(r.in.Result) != `"all"` {
			t.Errorf("Wait returned %s with result %s, want done with \"all\"", r.in.Status, r.in.Result)
		}
	}
	if n != waiters {
		t.Errorf("%d Waits returned, want %d", n, waiters)
	}
}
