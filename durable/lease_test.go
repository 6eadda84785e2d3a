package durable_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemgo/idem/durable"
	"github.com/idemgo/idem/internal/syncbuf"
)

// waitStepEvent waits for a StepStop event that match accepts.
func (b *testBundle) waitStepEvent(t *testing.T, what string, match func(durable.StepStopEvent) bool) durable.StepStopEvent {
	t.Helper()
	var got durable.StepStopEvent
	waitFor(t, what, func() bool {
		for _, e := range b.events.stepEvents() {
			if match(e) {
				got = e
				return true
			}
		}
		return false
	})
	return got
}

func TestSD8_ReapedWorkerCannotCommit(t *testing.T) {
	t.Parallel()
	started, release := make(chan int64, 1), make(chan struct{})
	fsm := mustFSM(t, durable.FSMConfig[int]{
		Name:    "lease",
		Initial: "a",
		Steps: map[string]durable.StepFunc[int]{
			"a": func(_ context.Context, s *durable.Step[int]) (durable.Outcome, error) {
				s.State = 100 + s.Attempt
				if s.Attempt == 1 {
					started <- s.ID
					<-release // the lease is reaped meanwhile
					return durable.Next("b"), nil
				}
				return durable.Done("second"), nil
			},
			"b": func(context.Context, *durable.Step[int]) (durable.Outcome, error) {
				return durable.Done("first"), nil
			},
		},
	})
	cfg := fast(fsm)
	// Heartbeats too rare to save the lease; a reaper that looks often.
	cfg.LeaseTTL, cfg.HeartbeatInterval, cfg.ReaperInterval = time.Hour, 30*time.Minute, 10*time.Millisecond
	b := setup(t, cfg)
	b.start(t)

	id := b.insert(t, fsm.With(0), nil)
	<-started
	b.exec(t, "UPDATE durable_instance SET lease_expires_at = now() - interval '1 second' WHERE id = $1", id)
	in := b.waitStatus(t, id, durable.StatusDone) // reaped, picked again at attempt 2, done
	if in.Attempt != 2 || string(in.Result) != `"second"` || string(in.State) != "102" {
		t.Fatalf("after the second attempt: attempt %d, result %s, state %s", in.Attempt, in.Result, in.State)
	}

	close(release)
	e := b.waitStepEvent(t, "the stale worker's commit", func(e durable.StepStopEvent) bool { return e.ID == id && e.Attempt == 1 })
	if !e.Fenced || e.CommitErr != nil || e.Kind != durable.KindNext {
		t.Fatalf("stale worker's step event %+v, want a fenced next", e)
	}
	after := b.get(t, id)
	if after.Status != durable.StatusDone || after.Step != "a" || string(after.Result) != `"second"` ||
		string(after.State) != "102" || !after.UpdatedAt.Equal(in.UpdatedAt) {
		t.Fatalf("the stale commit changed the row: %+v", after)
	}

	// The reaper reports after its statement, which may be after the row
	// it freed has been run again.
	waitFor(t, "a ReaperReaped event for the instance", func() bool {
		b.events.mu.Lock()
		defer b.events.mu.Unlock()
		return slices.ContainsFunc(b.events.reaped, func(e durable.ReapedEvent) bool { return slices.Contains(e.IDs, id) })
	})
}

func TestReaperReturnsDeadEnginesRows(t *testing.T) {
	t.Parallel()
	attempts := make(chan int, 1)
	fsm := mustFSM(t, durable.FSMConfig[struct{}]{
		Name:    "orphan",
		Initial: "a",
		Steps: map[string]durable.StepFunc[struct{}]{
			"a": func(_ context.Context, s *durable.Step[struct{}]) (durable.Outcome, error) {
				attempts <- s.Attempt
				return durable.Done(nil), nil
			},
		},
	})
	inserter := setup(t, nil)
	id := inserter.insert(t, fsm.With(struct{}{}), nil)
	// An engine that claimed the row with a 100 ms lease and died.
	inserter.exec(t, `UPDATE durable_instance SET status = 'executing', lease_owner = 'dead',
		lease_expires_at = now() + interval '100 milliseconds', claims = claims + 1 WHERE id = $1`, id)

	cfg := fast(fsm)
	cfg.ReaperInterval, cfg.HeartbeatInterval = 10*time.Millisecond, time.Second
	rec := &recorder{}
	engine := newClient(t, inserter.pool, cfg, rec)
	startClient(t, engine)
	if got := <-attempts; got != 2 {
		t.Fatalf("the step ran at attempt %d after the reap, want 2", got)
	}
	inserter.waitStatus(t, id, durable.StatusDone)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.reaped) != 1 || !slices.Equal(rec.reaped[0].IDs, []int64{id}) {
		t.Fatalf("reaped events %+v", rec.reaped)
	}
}

func TestHeartbeatKeepsLongStepsLeased(t *testing.T) {
	t.Parallel()
	started, release := make(chan int64, 1), make(chan struct{})
	fsm := mustFSM(t, durable.FSMConfig[struct{}]{
		Name:    "long",
		Initial: "a",
		Steps: map[string]durable.StepFunc[struct{}]{
			"a": func(_ context.Context, s *durable.Step[struct{}]) (durable.Outcome, error) {
				started <- s.ID
				<-release
				return durable.Done(nil), nil
			},
		},
	})
	cfg := fast(fsm)
	// Heartbeats 30 times per lease: a loaded machine (make test runs
	// packages side by side) may delay a few by a second or more.
	const ttl = 1500 * time.Millisecond
	cfg.LeaseTTL, cfg.HeartbeatInterval, cfg.ReaperInterval = ttl, 50*time.Millisecond, 10*time.Millisecond
	b := setup(t, cfg)
	b.start(t)
	id := b.insert(t, fsm.With(struct{}{}), nil)
	<-started
	first := b.get(t, id).LeaseExpiresAt
	// Outlive the first lease by a whole lease, with the reaper looking
	// all along.
	waitFor(t, "the lease to be extended past twice its length", func() bool {
		return b.get(t, id).LeaseExpiresAt.After(first.Add(2 * ttl))
	})
	close(release)
	in := b.waitStatus(t, id, durable.StatusDone)
	if in.Attempt != 1 {
		t.Fatalf("attempt %d, want 1: the lease was reaped", in.Attempt)
	}
}

// lockedRuns records the runs of the step of lockedFSM: the attempt of
// each, how many run at once, and how the first one of each instance was
// cancelled, if it was.
type lockedRuns struct {
	mu           sync.Mutex
	attempts     map[int64][]int
	afterRelease map[int64][]bool // for each run: whether the caller's lock had been released when it started
	running      map[int64]int
	maxRunning   map[int64]int
	cancelled    map[int64]stepCancel
	released     bool // the caller's lock is released, or is being
}

// stepCancel is when the context of a step was cancelled, as the step saw
// it, and its cause.
type stepCancel struct {
	at    time.Time
	cause error
}

func newLockedRuns() *lockedRuns {
	return &lockedRuns{attempts: map[int64][]int{}, afterRelease: map[int64][]bool{}, running: map[int64]int{},
		maxRunning: map[int64]int{}, cancelled: map[int64]stepCancel{}}
}

// lockedFSM is an FSM whose step, on its first run, holds until release
// is closed or its context is cancelled (then it fails with the
// context's error), and on any later run is done at once; r records its
// runs.
func lockedFSM(t *testing.T, r *lockedRuns, release chan struct{}) *durable.FSM[struct{}] {
	return mustFSM(t, durable.FSMConfig[struct{}]{
		Name:    "locked",
		Initial: "a",
		Steps: map[string]durable.StepFunc[struct{}]{
			"a": func(ctx context.Context, s *durable.Step[struct{}]) (durable.Outcome, error) {
				r.mu.Lock()
				r.attempts[s.ID] = append(r.attempts[s.ID], s.Attempt)
				r.afterRelease[s.ID] = append(r.afterRelease[s.ID], r.released)
				first := len(r.attempts[s.ID]) == 1
				r.running[s.ID]++
				r.maxRunning[s.ID] = max(r.maxRunning[s.ID], r.running[s.ID])
				r.mu.Unlock()
				defer func() {
					r.mu.Lock()
					r.running[s.ID]--
					r.mu.Unlock()
				}()
				if !first {
					return durable.Done(nil), nil
				}
				select {
				case <-release:
					return durable.Done(nil), nil
				case <-ctx.Done():
					r.mu.Lock()
					r.cancelled[s.ID] = stepCancel{time.Now(), context.Cause(ctx)}
					r.mu.Unlock()
					return durable.Outcome{}, ctx.Err()
				}
			},
		},
	})
}

// lockedEngine returns the runs of a lockedFSM, its release (closed when
// t ends, if not before), the FSM, and a configuration serving it with
// leases of ttl, a heartbeat every 100ms and a reaper pass every 50ms.
func lockedEngine(t *testing.T, ttl time.Duration) (*lockedRuns, chan struct{}, *durable.FSM[struct{}], *durable.Config) {
	runs, release := newLockedRuns(), make(chan struct{})
	closeAtCleanup(t, release)
	fsm := lockedFSM(t, runs, release)
	cfg := fast(fsm)
	cfg.LeaseTTL, cfg.HeartbeatInterval, cfg.ReaperInterval = ttl, 100*time.Millisecond, 50*time.Millisecond
	return runs, release, fsm, cfg
}

// startTwo inserts two instances of fsm, a lockedFSM recording into r,
// and waits for both steps to start. locked has the lower id: a
// heartbeat locks it first, in id order.
func (r *lockedRuns) startTwo(t *testing.T, b *testBundle, fsm *durable.FSM[struct{}]) (locked, other int64) {
	t.Helper()
	locked = b.insert(t, fsm.With(struct{}{}), nil)
	other = b.insert(t, fsm.With(struct{}{}), nil)
	waitFor(t, "both steps to start", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.attempts[locked]) == 1 && len(r.attempts[other]) == 1
	})
	return locked, other
}

// lockRow takes instance id's row lock with SignalTx, in a transaction of
// b's, as a caller would, and returns the transaction, rolled back when t
// ends unless committed before.
func (b *testBundle) lockRow(t *testing.T, id int64) pgx.Tx {
	t.Helper()
	tx, _ := beginTx(t, b)
	if err := b.client.SignalTx(ctxT(t), tx, durable.ByID(id), "note", nil, ""); err != nil {
		t.Fatal(err)
	}
	return tx
}

// A caller's transaction that holds one executing instance's row lock
// (SignalTx) for longer than the rest of its lease must not keep the
// engine from extending its other leases: those steps keep running once,
// unreaped. The locked row's lease is not extended meanwhile, so its step
// is cancelled (the lease lapsed; it is not taken for lost) once the
// lease the engine last extended may have lapsed, and not before: once
// the caller commits, the reaper of any engine may take the row. The step
// then runs again, after the lock is released, and never while its first
// run still goes on.
func TestRowLockedPastItsLeaseLapsesItsStepOnly(t *testing.T) {
	t.Parallel()
	// Heartbeats 30 times per lease: on a loaded machine (make test runs
	// packages side by side, every test's engine polling) one may come
	// late by a second or more, which must not let the unlocked row's
	// lease lapse. The test waits on the leases, not the clock, so a long
	// lease costs little more than its length.
	const ttl = 3 * time.Second
	runs, release, fsm, cfg := lockedEngine(t, ttl)
	logs := &syncbuf.Buffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	b := setup(t, nil)
	beats := newHeartbeatHang() // never on: it records when the heartbeats that succeeded were sent
	engine := newClient(t, hangingPool(t, b.url, beats), cfg, b.events)
	startClient(t, engine)

	locked, other := runs.startTwo(t, b, fsm)
	started := time.Now()
	waitFor(t, "a heartbeat sent after both steps started to succeed", func() bool {
		lastOK, _ := beats.state()
		return lastOK.After(started)
	})
	// The last heartbeat that succeeded before the lock was taken extended
	// the row's lease: the step's context must be kept for a LeaseTTL
	// after it was sent, at least. A later one may have extended it too,
	// until the lock was taken.
	extended, _ := beats.state()
	tx := b.lockRow(t, locked)
	lockTaken := time.Now()
	// Locked, the row's lease is no longer extended: as long as the lock
	// is held, it is where the last heartbeat before SignalTx left it.
	lockedUntil := b.get(t, locked).LeaseExpiresAt
	// The heartbeat goes on extending the other lease, past the end of the
	// locked one by a whole lease: a heartbeat that waited for the lock
	// (or failed on it) would extend neither, and the reaper would take
	// the other row back, its step to run again, once its lease expired.
	waitFor(t, "the unlocked instance's lease to outlast the locked one's by a lease", func() bool {
		return b.get(t, other).LeaseExpiresAt.After(lockedUntil.Add(ttl))
	})
	if until := b.get(t, locked).LeaseExpiresAt; !until.Equal(lockedUntil) {
		t.Fatalf("the locked instance's lease changed from %v to %v under the caller's lock", lockedUntil, until)
	}
	if got := b.get(t, locked); got.Status != durable.StatusExecuting || got.Attempt != 1 {
		t.Errorf("locked instance: %s attempt %d, want still executing its first attempt", got.Status, got.Attempt)
	}
	// By now the locked row's lease has expired (leases are in the
	// database's time), unextended: its step must have been cancelled as
	// its lease lapsed, not taken for lost (the claim is still this
	// engine's), neither before the lease the engine extended last may
	// lapse nor long after the last one it may have extended.
	var (
		c                         stepCancel
		cancelled, otherCancelled bool
	)
	for deadline := lockTaken.Add(ttl + 5*time.Second); ; time.Sleep(5 * time.Millisecond) {
		runs.mu.Lock()
		c, cancelled = runs.cancelled[locked]
		_, otherCancelled = runs.cancelled[other]
		runs.mu.Unlock()
		if cancelled || time.Now().After(deadline) {
			break
		}
	}
	switch {
	case !cancelled:
		t.Error("the locked instance's step was not cancelled once its lease, not extended under the lock, may have lapsed")
	case c.cause == durable.ErrLeaseLost || !errors.Is(c.cause, durable.ErrLeaseLost):
		t.Errorf("the locked instance's step was cancelled with cause %v, want its lease's lapse (wrapping ErrLeaseLost, not it)", c.cause)
	case c.at.Before(extended.Add(ttl - time.Second/2)):
		// The engine reads its clock before it takes a connection to
		// send a heartbeat on: allow it half a second.
		t.Errorf("the locked instance's step was cancelled %v before its lease may have lapsed", extended.Add(ttl).Sub(c.at))
	case c.at.After(lockTaken.Add(ttl + time.Second)):
		// The step sees the cancellation a little after it happened:
		// allow a loaded machine a second to schedule it.
		t.Errorf("the locked instance's step was cancelled %v after its lease may have lapsed", c.at.Sub(lockTaken.Add(ttl)))
	}
	if otherCancelled {
		t.Error("the unlocked instance's step was cancelled")
	}
	if strings.Contains(logs.String(), "lease lost") {
		t.Errorf("the locked claim was taken for lost:\n%s", logs.String())
	}

	// The caller commits: the row runs again, its first run over.
	runs.mu.Lock()
	runs.released = true
	runs.mu.Unlock()
	if err := tx.Commit(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	in := b.waitStatus(t, locked, durable.StatusDone)
	close(release)
	if in := b.waitStatus(t, other, durable.StatusDone); in.Attempt != 1 {
		t.Errorf("unlocked instance done at attempt %d, want 1", in.Attempt)
	}
	runs.mu.Lock()
	defer runs.mu.Unlock()
	if a := runs.attempts[other]; len(a) != 1 {
		t.Errorf("the unlocked instance's step ran at attempts %v while another row was locked, want once", a)
	}
	// Handed back (attempt unchanged) or reaped (attempt increased),
	// whichever takes the row first once the lock is released.
	if a, after := runs.attempts[locked], runs.afterRelease[locked]; len(a) != 2 || !after[1] || in.Attempt != a[1] {
		t.Errorf("the locked instance's step ran at attempts %v (after the lock's release: %v), done at attempt %d; want a second run after the release",
			a, after, in.Attempt)
	}
	t.Logf("the locked instance's step ran at attempts %v", runs.attempts[locked])
	if n := runs.maxRunning[locked]; n > 1 {
		t.Errorf("%d runs of the locked instance's step overlapped", n)
	}
}

// A caller's transaction that holds an executing instance's row lock for
// less than the rest of its lease costs the step nothing: it is not
// cancelled, and the heartbeat extends the lease again once the lock is
// released.
func TestRowLockedWithinItsLeaseKeepsItsStep(t *testing.T) {
	t.Parallel()
	runs, release, fsm, cfg := lockedEngine(t, 4*time.Second)
	b := setup(t, cfg)
	b.start(t)
	locked, other := runs.startTwo(t, b, fsm)
	// A fresh lease, then the lock, held while the heartbeat extends the
	// other lease by a second past the locked one's start (a few beats
	// skip the locked row), well within the locked lease.
	start := b.get(t, locked).LeaseExpiresAt
	waitFor(t, "the locked instance's lease to be extended", func() bool {
		return b.get(t, locked).LeaseExpiresAt.After(start)
	})
	tx := b.lockRow(t, locked)
	lockedUntil := b.get(t, locked).LeaseExpiresAt
	waitFor(t, "the unlocked instance's lease to outlast the locked one's by a second", func() bool {
		return b.get(t, other).LeaseExpiresAt.After(lockedUntil.Add(time.Second))
	})
	if err := tx.Commit(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the locked instance's lease to be extended after the lock's release", func() bool {
		return b.get(t, locked).LeaseExpiresAt.After(lockedUntil)
	})
	close(release)
	for _, id := range []int64{locked, other} {
		if in := b.waitStatus(t, id, durable.StatusDone); in.Attempt != 1 {
			t.Errorf("instance %d done at attempt %d, want 1", id, in.Attempt)
		}
	}
	runs.mu.Lock()
	defer runs.mu.Unlock()
	if c, ok := runs.cancelled[locked]; ok {
		t.Errorf("the step of the instance locked within its lease was cancelled (cause %v)", c.cause)
	}
	if a := runs.attempts[locked]; len(a) != 1 {
		t.Errorf("the step of the instance locked within its lease ran at attempts %v, want once", a)
	}
}

func TestLostLeaseCancelsStep(t *testing.T) {
	t.Parallel()
	started := make(chan int64, 1)
	fsm := mustFSM(t, durable.FSMConfig[string]{
		Name:    "stolen",
		Initial: "a",
		Steps: map[string]durable.StepFunc[string]{
			"a": func(ctx context.Context, s *durable.Step[string]) (durable.Outcome, error) {
				started <- s.ID
				<-ctx.Done()
				s.State = "should not be committed"
				return durable.Done(nil), nil
			},
		},
	})
	cfg := fast(fsm)
	cfg.LeaseTTL, cfg.HeartbeatInterval = time.Minute, 20*time.Millisecond
	b := setup(t, cfg)
	b.start(t)
	id := b.insert(t, fsm.With("initial"), nil)
	<-started
	b.exec(t, "UPDATE durable_instance SET lease_owner = 'thief' WHERE id = $1", id)
	e := b.waitStepEvent(t, "the cancelled step", func(e durable.StepStopEvent) bool { return e.ID == id })
	if !e.Fenced {
		t.Fatalf("step event %+v, want fenced", e)
	}
	in := b.get(t, id)
	var state string
	_ = json.Unmarshal(in.State, &state)
	if in.Status != durable.StatusExecuting || in.LeaseOwner != "thief" || state != "initial" {
		t.Fatalf("the thief's row was changed: %+v", in)
	}
	if !strings.Contains(b.client.ID(), "-") {
		t.Fatalf("default engine id %q", b.client.ID())
	}
}

// A row reaped from under a running step and claimed again by the same
// engine is held under a new claim count: the heartbeat marks the old
// claim lost and cancels its step, which no longer runs beside the new one.
func TestReclaimBySameEngineCancelsTheOldClaim(t *testing.T) {
	t.Parallel()
	started := make(chan int, 2)
	firstCancelled, release := make(chan struct{}), make(chan struct{})
	fsm := mustFSM(t, durable.FSMConfig[struct{}]{
		Name: "reclaimed", Initial: "a",
		Steps: map[string]durable.StepFunc[struct{}]{
			"a": func(ctx context.Context, s *durable.Step[struct{}]) (durable.Outcome, error) {
				started <- s.Attempt
				if s.Attempt == 1 {
					select {
					case <-ctx.Done():
						close(firstCancelled)
					case <-release:
					}
				} else {
					<-release
				}
				return durable.Done(nil), nil
			},
		},
	})
	cfg := fast(fsm)
	cfg.Queues = map[string]durable.QueueConfig{durable.DefaultQueue: {Concurrency: 2}}
	cfg.LeaseTTL, cfg.HeartbeatInterval, cfg.ReaperInterval = 10*time.Second, 100*time.Millisecond, 20*time.Millisecond
	b := setup(t, cfg)
	defer close(release)
	b.start(t)
	id := b.insert(t, fsm.With(struct{}{}), nil)
	if a := <-started; a != 1 {
		t.Fatalf("first run: attempt %d", a)
	}
	// The row is reaped, as after a pause longer than the lease (done as
	// the reaper does it: expiring the lease instead would race with the
	// heartbeat, which may extend it first).
	b.exec(t, `UPDATE durable_instance SET status = 'runnable', attempt = attempt + 1, lease_owner = NULL,
		lease_expires_at = NULL WHERE id = $1`, id)
	select {
	case a := <-started:
		if a != 2 {
			t.Fatalf("re-claim: attempt %d, want 2", a)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the reaped row was not claimed again")
	}
	select {
	case <-firstCancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the old claim's step was not cancelled: it runs beside the new one")
	}
}
