package durable_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem/durable"
	"github.com/idemgo/idem/internal/pgtest"
)

// waitBackoff is how long after a Wait starts the tests below end its
// instance: by then Wait's polls are a second apart (10 ms doubling), so
// an end that Wait learnt of only by polling would be seen up to a second
// late.
const waitBackoff = 2500 * time.Millisecond

// The intervals between Wait's polls (wait.go): the first poll is at
// once, the next after waitPollMin, doubling to waitPollMax.
const (
	waitPollMin = 10 * time.Millisecond
	waitPollMax = time.Second
)

// pollLog is a query tracer for a pool that records, for each Wait whose
// context carries a waitLabel, when each of its status polls started and
// ended. It tells a Wait that was woken from one that polled on its timer
// without measuring how long anything took, which a loaded machine
// stretches: Wait arms its timer after a poll's rows are read, so a poll
// that starts less than the timer's delay after the previous one ended
// was not started by the timer.
type pollLog struct {
	mu    sync.Mutex
	polls map[string][]pollSpan
}

type pollSpan struct{ start, end time.Time }

// waitLabel names a Wait in its context, for pollLog.
type waitLabel struct{}

// pollIndex is, in a poll's context, its place in pollLog.polls.
type pollIndex struct{}

func (l *pollLog) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	name, ok := ctx.Value(waitLabel{}).(string)
	if !ok || d.SQL != "SELECT status FROM durable_instance WHERE id = $1" {
		return ctx
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.polls[name] = append(l.polls[name], pollSpan{start: time.Now()})
	return context.WithValue(ctx, pollIndex{}, len(l.polls[name])-1)
}

func (l *pollLog) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	i, ok := ctx.Value(pollIndex{}).(int)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.polls[ctx.Value(waitLabel{}).(string)][i].end = time.Now()
}

// setupTraced is setup with a pool whose status polls log records.
func setupTraced(t *testing.T, cfg *durable.Config) (*testBundle, *pollLog) {
	t.Helper()
	url := pgtest.URL(t)
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	pc.MaxConns = 16
	log := &pollLog{polls: map[string][]pollSpan{}}
	pc.ConnConfig.Tracer = log
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	b := &testBundle{url: url, pool: pool, events: &recorder{}}
	b.client = newClient(t, pool, cfg, b.events)
	if err := b.client.Migrate(ctxT(t)); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return b, log
}

// labelled is ctx naming a Wait for pollLog.
func labelled(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, waitLabel{}, name)
}

// checkWoken fails t unless the Wait named name, which has returned an
// end that finished (the instance's FinishedAt, its end's transaction
// time) at finished, saw it at a poll that its wake-up started: one that
// began before the timer armed after the previous poll could fire. A poll
// its timer started passes only within wakeGrace of finished: the end's
// commit is seen by the database before this process wakes the Waits on
// it, and a timer that fires between the two starts a poll that sees the
// end first. A Wait that is not woken at all polls on its timer up to a
// second after the end, mostly later than that.
func (l *pollLog) checkWoken(t *testing.T, name string, finished time.Time) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	polls := l.polls[name]
	n := len(polls)
	if n < 2 {
		t.Errorf("%s: %d status polls, want the first and at least the one that saw the end", name, n)
		return
	}
	delay := min(waitPollMin<<(n-2), waitPollMax)
	gap := polls[n-1].start.Sub(polls[n-2].end)
	if late := polls[n-1].start.Sub(finished); gap >= delay && late > wakeGrace {
		t.Errorf("%s saw the end at poll %d, %v after poll %d ended, on its %v timer, %v after the end: not woken", name, n, gap, n-1, delay, late)
	}
}

// wakeGrace is how long after an end's transaction a Wait's poll on its
// timer may see the end before the Wait is woken (see checkWoken).
const wakeGrace = 250 * time.Millisecond

// timedWait is what a Wait run in a goroutine returned.
type timedWait struct {
	in  *durable.Instance
	err error
}

// goTimedWait runs c.Wait(ctx, id) in a goroutine and returns the channel
// its result arrives on.
func goTimedWait(ctx context.Context, c *durable.Client, id int64) <-chan timedWait {
	ch := make(chan timedWait, 1)
	go func() {
		in, err := c.Wait(ctx, id)
		ch <- timedWait{in, err}
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
	b, polls := setupTraced(t, fast(sleeper))
	b.start(t)
	producer := newClient(t, b.pool, nil, &recorder{})
	ctx := ctxT(t)

	started := time.Now()
	done := b.insert(t, sleeper.With(sleeperState{Until: started.Add(waitBackoff)}), nil)
	failed := b.insert(t, sleeper.With(sleeperState{Until: started.Add(waitBackoff), Fail: true}), nil)
	waits := []<-chan timedWait{
		goTimedWait(labelled(ctx, "Wait 0"), b.client, done), goTimedWait(labelled(ctx, "Wait 1"), producer, done),
		goTimedWait(labelled(ctx, "Wait 2"), b.client, failed), goTimedWait(labelled(ctx, "Wait 3"), producer, failed),
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
		polls.checkWoken(t, fmt.Sprintf("Wait %d", i), r.in.FinishedAt)
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
	b, polls := setupTraced(t, fast(ctl, parentFSM))
	b.start(t)
	producer := newClient(t, b.pool, nil, &recorder{})
	ctx := ctxT(t)

	parent := b.insert(t, parentFSM.With(struct{}{}), nil)
	child := onlyChild(t, b, parent)
	started := time.Now()
	waits := []<-chan timedWait{
		goTimedWait(labelled(ctx, "Wait 0"), b.client, parent), goTimedWait(labelled(ctx, "Wait 1"), producer, parent),
		goTimedWait(labelled(ctx, "Wait 2"), b.client, child), goTimedWait(labelled(ctx, "Wait 3"), producer, child),
	}
	time.Sleep(time.Until(started.Add(waitBackoff))) // a delay, not an assertion: the polls back off
	if err := producer.Cancel(ctx, durable.ByID(parent), "no longer wanted"); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	for i, ch := range waits {
		r := receiveTimed(t, ch)
		if r.in.Status != durable.StatusCancelled || r.in.Error != "no longer wanted" {
			t.Fatalf("Wait %d returned %s (%q), want cancelled with the reason", i, r.in.Status, r.in.Error)
		}
		polls.checkWoken(t, fmt.Sprintf("Wait %d", i), r.in.FinishedAt)
	}
}

// A step's Cancel outcome wakes the Waits on the live descendants it
// cancels with its instance: here a child that failed, released its parent
// and was revived by Client.Retry while the parent went on, the only way a
// parent's step runs with a live descendant (its Children wait for every
// child to end). The Wait on the child, on the engine's client, returns
// well within a second of the parent's step although its polls are a
// second apart by then, and finds it cancelled with the step's reason.
func TestWaitIsPromptForACancelOutcomesDescendants(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	parentFSM := mustFSM(t, durable.FSMConfig[struct{}]{
		Name: "parent", Initial: "spawn",
		Steps: map[string]durable.StepFunc[struct{}]{
			"spawn": func(context.Context, *durable.Step[struct{}]) (durable.Outcome, error) {
				return durable.Children("hold", durable.InsertParams{Args: ctl.With(ctlState{})}), nil
			},
			"hold": func(context.Context, *durable.Step[struct{}]) (durable.Outcome, error) {
				return durable.Await("give-up", "give-up"), nil
			},
			"give-up": func(context.Context, *durable.Step[struct{}]) (durable.Outcome, error) {
				return durable.Cancel("given up"), nil
			},
		},
	})
	b, polls := setupTraced(t, fast(ctl, parentFSM))
	b.start(t)
	ctx := ctxT(t)

	parent := b.insert(t, parentFSM.With(struct{}{}), nil)
	child := onlyChild(t, b, parent)
	b.waitStatus(t, child, durable.StatusAwaitingSignal)
	b.signal(t, durable.ByID(child), "fail", nil, "")
	b.waitStatus(t, child, durable.StatusFailed)
	b.waitStatus(t, parent, durable.StatusAwaitingSignal) // released by the failed child
	if _, err := b.client.Retry(ctx, durable.ByID(child), nil); err != nil {
		t.Fatalf("Retry: %v", err)
	}
	b.waitStatus(t, child, durable.StatusAwaitingSignal) // live again, under a parent that no longer waits for it

	started := time.Now()
	ch := goTimedWait(labelled(ctx, "Wait"), b.client, child)
	time.Sleep(time.Until(started.Add(waitBackoff))) // a delay, not an assertion: the polls back off
	b.signal(t, durable.ByID(parent), "give-up", nil, "")
	r := receiveTimed(t, ch)
	if r.in.Status != durable.StatusCancelled || r.in.Error != "given up" {
		t.Fatalf("Wait returned %s (%q), want cancelled with the step's reason", r.in.Status, r.in.Error)
	}
	polls.checkWoken(t, "Wait", r.in.FinishedAt)
	if in := b.get(t, parent); in.Status != durable.StatusCancelled {
		t.Errorf("parent %s, want cancelled", in.Status)
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
	b, polls := setupTraced(t, reapedEngine(1, ctl))
	b.start(t)
	ctx := ctxT(t)
	id := b.insert(t, ctl.With(ctlState{}), elsewhere) // left to the dead claim
	started := time.Now()
	ch := goTimedWait(labelled(ctx, "Wait"), b.client, id)
	time.Sleep(time.Until(started.Add(waitBackoff))) // a delay, not an assertion: the polls back off
	b.deadClaim(t, id, "dead")
	r := receiveTimed(t, ch)
	if r.in.Status != durable.StatusFailed || !strings.HasPrefix(r.in.Error, durable.ErrReapedTooOften.Error()) {
		t.Fatalf("Wait returned %s (%q), want failed as reaped too often", r.in.Status, r.in.Error)
	}
	polls.checkWoken(t, "Wait", r.in.FinishedAt)
}

// onlyChild waits for parent to await its children and returns the id of
// its one child.
func onlyChild(t *testing.T, b *testBundle, parent int64) int64 {
	t.Helper()
	b.waitStatus(t, parent, durable.StatusAwaitingChildren)
	kids, err := b.client.ChildrenOf(ctxT(t), parent)
	if err != nil || len(kids) != 1 {
		t.Fatalf("ChildrenOf = %v, %v, want one child", kids, err)
	}
	return kids[0].ID
}
