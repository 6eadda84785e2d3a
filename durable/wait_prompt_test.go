package durable_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgo/idem/durable"
)

// waitBackoff is how long after a Wait starts the tests below end its
// instance: by then Wait's polls are a second apart (10 ms doubling), so
// an end that Wait learnt of only by polling would be seen up to a second
// late.
const waitBackoff = 2500 * time.Millisecond

// prompt is how late, at most, the tests below accept that a Wait returns
// after an end committed in its process.
const prompt = 300 * time.Millisecond

// timedWait is what a Wait run in a goroutine returned, and when.
type timedWait struct {
	in  *durable.Instance
	err error
	at  time.Time
}

// goTimedWait runs c.Wait(ctx, id) in a goroutine and returns the channel
// its result arrives on, with the time it returned.
func goTimedWait(ctx context.Context, c *durable.Client, id int64) <-chan timedWait {
	ch := make(chan timedWait, 1)
	go func() {
		in, err := c.Wait(ctx, id)
		ch <- timedWait{in, err, time.Now()}
	}()
	return ch
}

// receiveTimed returns the result of a Wait, failing t if none comes
// within 20 s.
func receiveTimed(t *testing.T, ch <-chan timedWait) timedWait {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("Wait: %v", r.err)
		}
		return r
	case <-time.After(20 * time.Second):
		t.Fatal("Wait did not return")
		return timedWait{}
	}
}

// sleeperState is the state of the sleeper FSM: its one step returns at
// Until, and fails if Fail.
type sleeperState struct {
	Until time.Time `json:"until"`
	Fail  bool      `json:"fail,omitempty"`
}

// sleeperResult is the sleeper's result: when its step finished, by the
// step's own clock.
type sleeperResult struct {
	Finished time.Time `json:"finished"`
}

// sleeperFSM ends at its state's Until: done, with the time its step
// finished as its result, or, with Fail, failed at its one attempt, with
// that time (RFC 3339) as its error.
func sleeperFSM(t testing.TB) *durable.FSM[sleeperState] {
	return mustFSM(t, durable.FSMConfig[sleeperState]{
		Name:        "sleeper",
		Initial:     "sleep",
		MaxAttempts: 1,
		Steps: map[string]durable.StepFunc[sleeperState]{
			"sleep": func(ctx context.Context, s *durable.Step[sleeperState]) (durable.Outcome, error) {
				timer := time.NewTimer(time.Until(s.State.Until))
				defer timer.Stop()
				select {
				case <-ctx.Done():
					return durable.Outcome{}, ctx.Err()
				case <-timer.C:
				}
				if s.State.Fail {
					return durable.Outcome{}, errors.New(time.Now().Format(time.RFC3339Nano))
				}
				return durable.Done(sleeperResult{Finished: time.Now()}), nil
			},
		},
	})
}

// A step that ends its instance in this process, done or failed after its
// last attempt, wakes the Waits on it, on the engine's own client and on a
// producer-only client sharing its pool: they return well within a second
// of the step's end although their polls are a second apart by then.
func TestWaitIsPromptForAStepEndInThisProcess(t *testing.T) {
	t.Parallel()
	sleeper := sleeperFSM(t)
	b := setup(t, fast(sleeper))
	b.start(t)
	producer := newClient(t, b.pool, nil, &recorder{})
	ctx := ctxT(t)

	started := time.Now()
	done := b.insert(t, sleeper.With(sleeperState{Until: started.Add(waitBackoff)}), nil)
	failed := b.insert(t, sleeper.With(sleeperState{Until: started.Add(waitBackoff), Fail: true}), nil)
	waits := []<-chan timedWait{
		goTimedWait(ctx, b.client, done), goTimedWait(ctx, producer, done),
		goTimedWait(ctx, b.client, failed), goTimedWait(ctx, producer, failed),
	}
	for i, ch := range waits {
		r := receiveTimed(t, ch)
		var res sleeperResult
		switch {
		case r.in.ID == done && r.in.Status == durable.StatusDone:
			if err := json.Unmarshal(r.in.Result, &res); err != nil {
				t.Fatalf("result %s: %v", r.in.Result, err)
			}
		case r.in.ID == failed && r.in.Status == durable.StatusFailed:
			var err error
			if res.Finished, err = time.Parse(time.RFC3339Nano, r.in.Error); err != nil {
				t.Fatalf("error %q: %v", r.in.Error, err)
			}
		default:
			t.Fatalf("Wait %d returned instance %d %s (%s)", i, r.in.ID, r.in.Status, r.in.Error)
		}
		if res.Finished.Sub(started) < waitBackoff {
			t.Fatalf("the step finished %v after the Wait started, before its %v", res.Finished.Sub(started), waitBackoff)
		}
		if late := r.at.Sub(res.Finished); late > prompt {
			t.Errorf("Wait %d returned %v after the step finished, want within %v", i, late, prompt)
		}
	}
}

// Client.Cancel in this process wakes the Waits on the instance it
// cancels, and on the descendants it cancels with it, on its own client
// and on another client sharing its pool: they return well within a second
// of the cancel although their polls are a second apart by then.
func TestWaitIsPromptForACancelInThisProcess(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	parentFSM := mustFSM(t, durable.FSMConfig[struct{}]{
		Name: "parent", Initial: "spawn",
		Steps: map[string]durable.StepFunc[struct{}]{
			"spawn": func(context.Context, *durable.Step[struct{}]) (durable.Outcome, error) {
				return durable.Children("after", durable.InsertParams{Args: ctl.With(ctlState{})}), nil
			},
			"after": func(context.Context, *durable.Step[struct{}]) (durable.Outcome, error) {
				return durable.Done(nil), nil
			},
		},
	})
	b := setup(t, fast(ctl, parentFSM))
	b.start(t)
	producer := newClient(t, b.pool, nil, &recorder{})
	ctx := ctxT(t)

	parent := b.insert(t, parentFSM.With(struct{}{}), nil)
	b.waitStatus(t, parent, durable.StatusAwaitingChildren)
	kids, err := b.client.ChildrenOf(ctx, parent)
	if err != nil || len(kids) != 1 {
		t.Fatalf("ChildrenOf = %v, %v, want one child", kids, err)
	}
	child := kids[0].ID
	started := time.Now()
	waits := []<-chan timedWait{
		goTimedWait(ctx, b.client, parent), goTimedWait(ctx, producer, parent),
		goTimedWait(ctx, b.client, child), goTimedWait(ctx, producer, child),
	}
	time.Sleep(time.Until(started.Add(waitBackoff))) // a delay, not an assertion: the polls back off
	cancelled := time.Now()
	if err := producer.Cancel(ctx, durable.ByID(parent), "no longer wanted"); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	for i, ch := range waits {
		r := receiveTimed(t, ch)
		if r.in.Status != durable.StatusCancelled || r.in.Error != "no longer wanted" {
			t.Fatalf("Wait %d returned %s (%q), want cancelled with the reason", i, r.in.Status, r.in.Error)
		}
		if late := r.at.Sub(cancelled); late > prompt {
			t.Errorf("Wait %d returned %v after Cancel was called, want within %v", i, late, prompt)
		}
	}
}

// An instance that a client on another pool ends (here on the same
// database, as it would be in another process) wakes no Wait: Wait still
// sees its end, by polling.
func TestWaitPollsForAnEndOnAnotherPool(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	other := newClient(t, newPool(t, b.url), nil, &recorder{})
	ctx := ctxT(t)
	id := b.insert(t, ctlFSM(t).With(ctlState{}), nil)
	ch := goTimedWait(ctx, b.client, id)
	waitFor(t, "the Wait to register", func() bool { return durable.WaitsOn(b.client) == 1 })
	if err := other.Cancel(ctx, durable.ByID(id), "elsewhere"); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	r := receiveTimed(t, ch)
	if r.in.Status != durable.StatusCancelled || r.in.Error != "elsewhere" {
		t.Errorf("Wait returned %s (%q), want cancelled with the reason", r.in.Status, r.in.Error)
	}
	if n := durable.WaitsOn(b.client); n != 0 {
		t.Errorf("%d Waits still registered after the Wait returned", n)
	}
}

// Every Wait that returns, whether its context ended, it found its
// instance ended or it failed, leaves no registration behind.
func TestWaitLeavesNoRegistration(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	var ids []int64
	for range 5 {
		ids = append(ids, b.insert(t, ctlFSM(t).With(ctlState{}), nil))
	}

	// Many Waits whose context is cancelled.
	const waits = 100
	ctx, cancel := context.WithCancel(ctxT(t))
	var wg sync.WaitGroup
	errs := make(chan error, waits)
	for i := range waits {
		wg.Go(func() {
			_, err := b.client.Wait(ctx, ids[i%len(ids)])
			errs <- err
		})
	}
	waitFor(t, "the Waits to register", func() bool { return durable.WaitsOn(b.client) == waits })
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Wait with its context cancelled: %v, want context.Canceled", err)
		}
	}
	if n := durable.WaitsOn(b.client); n != 0 {
		t.Fatalf("%d Waits still registered after their contexts were cancelled", n)
	}

	// Waits that find their instance ended, by a wake-up or by their
	// first poll, that find no row, and whose deadline passes.
	ctx = ctxT(t)
	ch := goTimedWait(ctx, b.client, ids[0])
	waitFor(t, "the Wait to register", func() bool { return durable.WaitsOn(b.client) == 1 })
	if err := b.client.Cancel(ctx, durable.ByID(ids[0]), ""); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	receiveTimed(t, ch)
	if _, err := b.client.Wait(ctx, ids[0]); err != nil {
		t.Errorf("Wait on an ended instance: %v", err)
	}
	if _, err := b.client.Wait(ctx, 1<<50); !errors.Is(err, durable.ErrNotFound) {
		t.Errorf("Wait on no row: %v, want ErrNotFound", err)
	}
	dctx, dcancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer dcancel()
	if _, err := b.client.Wait(dctx, ids[1]); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait past its deadline: %v, want context.DeadlineExceeded", err)
	}
	if n := durable.WaitsOn(b.client); n != 0 {
		t.Errorf("%d Waits still registered after they returned", n)
	}

	// A Wait whose poll fails: its pool is closed.
	pool := newPool(t, b.url)
	closed := newClient(t, pool, nil, &recorder{})
	pool.Close()
	if _, err := closed.Wait(ctx, ids[1]); err == nil || errors.Is(err, durable.ErrNotFound) {
		t.Errorf("Wait on a closed pool: %v, want the pool's error", err)
	}
	if n := durable.WaitsOn(closed); n != 0 {
		t.Errorf("%d Waits still registered after a failed poll", n)
	}
}

// The reaper of an engine in this process, failing an instance reaped too
// often, wakes the Waits on it: they return well within a second of the
// lease's expiry although their polls are a second apart by then.
func TestWaitIsPromptForAReaperFailureInThisProcess(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	b := setup(t, reapedEngine(1, ctl))
	b.start(t)
	ctx := ctxT(t)
	id := b.insert(t, ctl.With(ctlState{}), elsewhere) // left to the dead claim
	started := time.Now()
	ch := goTimedWait(ctx, b.client, id)
	time.Sleep(time.Until(started.Add(waitBackoff))) // a delay, not an assertion: the polls back off
	expired := time.Now()
	b.deadClaim(t, id, "dead")
	r := receiveTimed(t, ch)
	if r.in.Status != durable.StatusFailed || !strings.HasPrefix(r.in.Error, durable.ErrReapedTooOften.Error()) {
		t.Fatalf("Wait returned %s (%q), want failed as reaped too often", r.in.Status, r.in.Error)
	}
	if late := r.at.Sub(expired); late > prompt {
		t.Errorf("Wait returned %v after the lease expired, want within %v", late, prompt)
	}
}
