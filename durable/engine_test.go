package durable_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/idemgo/idem/durable"
)

func TestTwoEnginesNeverRunAStepTwiceAtOnce(t *testing.T) {
	t.Parallel()
	var (
		mu         sync.Mutex
		running    = map[string]int{}
		runs       = map[string]int{}
		violations []string
	)
	step := func(next durable.Outcome) durable.StepFunc[struct{}] {
		return func(_ context.Context, s *durable.Step[struct{}]) (durable.Outcome, error) {
			key := fmt.Sprintf("%d/%s", s.ID, s.Name)
			mu.Lock()
			running[key]++
			runs[key]++
			if running[key] > 1 {
				violations = append(violations, key)
			}
			mu.Unlock()
			runtime.Gosched()
			mu.Lock()
			running[key]--
			mu.Unlock()
			return next, nil
		}
	}
	fsm := mustFSM(t, durable.FSMConfig[struct{}]{
		Name: "three", Initial: "a",
		Steps: map[string]durable.StepFunc[struct{}]{
			"a": step(durable.Next("b")),
			"b": step(durable.Next("c")),
			"c": step(durable.Done(nil)),
		},
	})
	cfg := fast(fsm)
	cfg.Queues = map[string]durable.QueueConfig{durable.DefaultQueue: {Concurrency: 4, Prefetch: 2}}
	b := setup(t, cfg)
	const n = 150
	params := make([]durable.InsertParams, n)
	for i := range params {
		params[i] = durable.InsertParams{Args: fsm.With(struct{}{})}
	}
	if _, err := b.client.InsertAll(ctxT(t), params); err != nil {
		t.Fatal(err)
	}

	other := &recorder{}
	cfg2 := *cfg
	cfg2.ID = "second"
	second := newClient(t, newPool(t, b.url), &cfg2, other)
	b.start(t)
	startClient(t, second)
	waitFor(t, "every instance to be done", func() bool {
		return b.count(t, "SELECT count(*) FROM durable_instance WHERE status = 'done'") == n
	})

	mu.Lock()
	defer mu.Unlock()
	if len(violations) > 0 {
		t.Fatalf("steps ran twice at once: %v", violations)
	}
	if len(runs) != 3*n {
		t.Fatalf("%d distinct steps ran, want %d", len(runs), 3*n)
	}
	for key, c := range runs {
		if c != 1 {
			t.Fatalf("step %s ran %d times", key, c)
		}
	}
	t.Logf("steps run by the first engine: %d, by the second: %d", len(b.events.stepEvents()), len(other.stepEvents()))
}

// blockingFSM is an FSM whose one step reports its start and waits for
// release or for its context to end.
func blockingFSM(t *testing.T, started chan<- int64, release <-chan struct{}) *durable.FSM[struct{}] {
	return mustFSM(t, durable.FSMConfig[struct{}]{
		Name: "blocking", Initial: "a",
		Steps: map[string]durable.StepFunc[struct{}]{
			"a": func(ctx context.Context, s *durable.Step[struct{}]) (durable.Outcome, error) {
				started <- s.ID
				select {
				case <-release:
					return durable.Done(nil), nil
				case <-ctx.Done():
					return durable.Outcome{}, ctx.Err()
				}
			},
		},
	})
}

func TestStopFinishesRunningStepsAndReleasesClaims(t *testing.T) {
	t.Parallel()
	started, release := make(chan int64, 4), make(chan struct{})
	fsm := blockingFSM(t, started, release)
	cfg := fast(fsm)
	cfg.Queues = map[string]durable.QueueConfig{durable.DefaultQueue: {Concurrency: 1, Prefetch: 3}}
	b := setup(t, cfg)
	for range 4 {
		b.insert(t, fsm.With(struct{}{}), nil)
	}
	b.start(t)
	running := <-started
	waitFor(t, "all four to be claimed", func() bool {
		return b.count(t, "SELECT count(*) FROM durable_instance WHERE status = 'executing'") == 4
	})

	stopped := make(chan error, 1)
	go func() { stopped <- b.client.Stop(context.Background()) }()
	waitFor(t, "the drain", func() bool {
		b.events.mu.Lock()
		defer b.events.mu.Unlock()
		return len(b.events.drains) == 1
	})
	if d := b.events.drains[0]; d.Released != 3 || d.InFlight != 1 || d.Queue != durable.DefaultQueue {
		t.Fatalf("drain event %+v, want 3 released and 1 in flight", d)
	}
	if n := b.count(t, `SELECT count(*) FROM durable_instance
		WHERE status = 'runnable' AND lease_owner IS NULL AND attempt = 1 AND id <> $1`, running); n != 3 {
		t.Fatalf("%d claimed rows handed back, want 3", n)
	}
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) while a step was running", err)
	default:
	}
	close(release)
	if err := <-stopped; err != nil {
		t.Fatalf("Stop: %v", err)
	}
	<-b.client.Stopped()
	if in := b.get(t, running); in.Status != durable.StatusDone {
		t.Fatalf("the running step's instance is %s after Stop, want done", in.Status)
	}

	// Another run picks up the rows handed back.
	startClient(t, b.client)
	waitFor(t, "the rest to be done", func() bool {
		return b.count(t, "SELECT count(*) FROM durable_instance WHERE status = 'done'") == 4
	})
}

func TestStopCancelsStepsWhenItsContextEnds(t *testing.T) {
	t.Parallel()
	started := make(chan int64, 1)
	fsm := blockingFSM(t, started, nil)
	b := setup(t, fast(fsm))
	b.start(t)
	id := b.insert(t, fsm.With(struct{}{}), nil)
	<-started
	hardStop(t, b)
	// The cancelled step returned an error: not its own failure, so the
	// row is handed back without spending the attempt.
	if in := b.get(t, id); in.Status != durable.StatusRunnable || in.Attempt != 1 {
		t.Fatalf("after a hard stop: status %s, attempt %d, want runnable at attempt 1", in.Status, in.Attempt)
	}
}

// A hard stop at an instance's last attempt does not fail it for good: a
// crash at the same moment would only have run the step again.
func TestHardStopAtTheLastAttemptDoesNotFail(t *testing.T) {
	t.Parallel()
	started := make(chan int64, 1)
	fsm := mustFSM(t, durable.FSMConfig[struct{}]{
		Name:        "last",
		Initial:     "a",
		MaxAttempts: 1,
		Steps: map[string]durable.StepFunc[struct{}]{
			"a": func(ctx context.Context, s *durable.Step[struct{}]) (durable.Outcome, error) {
				started <- s.ID
				<-ctx.Done()
				return durable.Outcome{}, ctx.Err()
			},
		},
	})
	b := setup(t, fast(fsm))
	b.start(t)
	id := b.insert(t, fsm.With(struct{}{}), nil)
	<-started
	hardStop(t, b)
	if in := b.get(t, id); in.Status != durable.StatusRunnable || in.Attempt != 1 {
		t.Fatalf("after a hard stop at the last attempt: status %s, attempt %d, error %q; want runnable at attempt 1", in.Status, in.Attempt, in.Error)
	}
	ev := b.waitStepEvent(t, "the step's stop event", func(e durable.StepStopEvent) bool { return e.ID == id })
	if !ev.HandedBack || ev.Kind != "" || ev.Err == nil {
		t.Errorf("stop event %+v, want HandedBack with the step's error and no kind", ev)
	}
}

// The error handler of a step handed back by a hard stop is not called:
// its outcome would be thrown away, and its side effects (an alert, a
// compensation) would happen for a failure that is the stop's, of a step
// that runs again.
func TestHardStopDoesNotCallTheErrorHandler(t *testing.T) {
	t.Parallel()
	started := make(chan int64, 1)
	handled := make(chan error, 1)
	fsm := mustFSM(t, durable.FSMConfig[struct{}]{
		Name:    "handled",
		Initial: "a",
		Steps: map[string]durable.StepFunc[struct{}]{
			"a": func(ctx context.Context, s *durable.Step[struct{}]) (durable.Outcome, error) {
				started <- s.ID
				<-ctx.Done()
				return durable.Outcome{}, ctx.Err()
			},
		},
		OnError: func(_ context.Context, _ *durable.Step[struct{}], err error) durable.Outcome {
			handled <- err
			return durable.Stop("handled")
		},
	})
	b := setup(t, fast(fsm))
	b.start(t)
	id := b.insert(t, fsm.With(struct{}{}), nil)
	<-started
	hardStop(t, b)
	ev := b.waitStepEvent(t, "the step's stop event", func(e durable.StepStopEvent) bool { return e.ID == id })
	if !ev.HandedBack {
		t.Fatalf("stop event %+v, want HandedBack", ev)
	}
	select {
	case err := <-handled:
		t.Errorf("OnError was called with %v for a step handed back", err)
	default:
	}
	if in := b.get(t, id); in.Status != durable.StatusRunnable || in.Attempt != 1 {
		t.Fatalf("after a hard stop: status %s, attempt %d, want runnable at attempt 1", in.Status, in.Attempt)
	}
}

func TestStartCancelledContextStopsEngine(t *testing.T) {
	t.Parallel()
	b := setup(t, fast(ctlFSM(t)))
	ctx, cancel := context.WithCancel(context.Background())
	if err := b.client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	<-b.client.Stopped()
}

func TestStartErrors(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	if err := b.client.Start(ctxT(t)); err == nil {
		t.Fatal("Start without queues succeeded")
	}
	select {
	case <-b.client.Stopped():
	default:
		t.Fatal("Stopped of a client never started is not closed")
	}
	if err := b.client.Stop(ctxT(t)); err != nil {
		t.Fatalf("Stop of a client never started: %v", err)
	}

	e := newClient(t, b.pool, fast(ctlFSM(t)), &recorder{})
	startClient(t, e)
	if err := e.Start(ctxT(t)); err == nil {
		t.Fatal("second Start succeeded")
	}
}

func TestConfigValidates(t *testing.T) {
	t.Parallel()
	pool := newPool(t, "postgres://127.0.0.1:1/none") // never connected
	ctl := ctlFSM(t)
	for name, cfg := range map[string]durable.Config{
		"zero concurrency": {Queues: map[string]durable.QueueConfig{"q": {}}},
		"empty queue name": {Queues: map[string]durable.QueueConfig{"": {Concurrency: 1}}},
		"heartbeat":        {LeaseTTL: time.Second, HeartbeatInterval: time.Second},
		"negative poll":    {PollInterval: -1},
		"twice":            {FSMs: []durable.Definition{ctl, ctl}},
		"nil FSM":          {FSMs: []durable.Definition{nil}},
	} {
		if _, err := durable.NewClient(pool, &cfg); err == nil {
			t.Errorf("%s: NewClient succeeded", name)
		}
	}
	if _, err := durable.NewClient(nil, nil); err == nil {
		t.Error("NewClient without a pool succeeded")
	}
}

func TestPickerServesOnlyItsQueues(t *testing.T) {
	t.Parallel()
	runs := make(chan ran, 2)
	fsm := keyedFSM(t, runs)
	cfg := fast(fsm)
	cfg.Queues = map[string]durable.QueueConfig{"mine": {Concurrency: 1}}
	b := setup(t, cfg)
	b.start(t)
	b.insert(t, fsm.With(struct{}{}), &durable.InsertOpts{Queue: "theirs", CorrelationKey: "theirs"})
	b.insert(t, fsm.With(struct{}{}), &durable.InsertOpts{Queue: "mine", CorrelationKey: "mine"})
	if r := <-runs; r.key != "mine" {
		t.Fatalf("ran %q", r.key)
	}
	if n := b.count(t, "SELECT count(*) FROM durable_instance WHERE queue = 'theirs' AND status = 'runnable'"); n != 1 {
		t.Fatal("the other queue's instance is not runnable and waiting")
	}
}

func TestNotifyWakesPickerWithoutPolling(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	cfg := fast(ctl)
	cfg.PollInterval = time.Hour // only the first poll, pokes and hints run steps
	b := setup(t, cfg)
	b.start(t)
	inserter := newClient(t, newPool(t, b.url), nil, &recorder{})
	id, err := inserter.Insert(ctxT(t), ctl.With(ctlState{}), nil)
	if err != nil {
		t.Fatal(err)
	}
	b.waitStatus(t, id, durable.StatusAwaitingSignal)
	if err := inserter.Signal(ctxT(t), durable.ByID(id), "finish", nil, ""); err != nil {
		t.Fatal(err)
	}
	b.waitStatus(t, id, durable.StatusDone)
}

func TestPollOnly(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	cfg := fast(ctl)
	cfg.PollOnly = true
	b := setup(t, cfg)
	b.start(t)
	id := b.insert(t, ctl.With(ctlState{}), nil)
	b.waitStatus(t, id, durable.StatusAwaitingSignal)
	b.signal(t, durable.ByID(id), "finish", nil, "")
	b.waitStatus(t, id, durable.StatusDone)
}

// hardStop stops b's engine with a deadline its running steps outlast, so
// that the engine cancels them, and checks that Stop says so.
func hardStop(t *testing.T, b *testBundle) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := b.client.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stop: %v, want DeadlineExceeded", err)
	}
}
