package durable_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgo/idem/durable"
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

// A caller's transaction that holds one executing instance's row lock
// (SignalTx, for longer than a lease) must not keep the engine from
// extending its other leases: those steps keep running once, unreaped;
// and the locked instance's claim is not taken for lost meanwhile.
func TestHeartbeatSkipsRowsLockedByCallers(t *testing.T) {
	t.Parallel()
	var (
		mu        sync.Mutex
		starts    = map[int64]int{}
		cancelled = map[int64]bool{}
	)
	release := make(chan struct{})
	fsm := mustFSM(t, durable.FSMConfig[struct{}]{
		Name:    "locked",
		Initial: "a",
		Steps: map[string]durable.StepFunc[struct{}]{
			"a": func(ctx context.Context, s *durable.Step[struct{}]) (durable.Outcome, error) {
				mu.Lock()
				starts[s.ID]++
				mu.Unlock()
				select {
				case <-release:
				case <-ctx.Done():
					mu.Lock()
					cancelled[s.ID] = true
					mu.Unlock()
				}
				return durable.Done(nil), nil
			},
		},
	})
	cfg := fast(fsm)
	// Heartbeats 40 times per lease: on a loaded machine (make test runs
	// packages side by side, every test's engine polling) one may come
	// late by a second or more, which must not let the unlocked row's
	// lease lapse. The test waits on the leases, not the clock, so a long
	// lease costs little more than its length.
	const ttl = 4 * time.Second
	cfg.LeaseTTL, cfg.HeartbeatInterval, cfg.ReaperInterval = ttl, 100*time.Millisecond, 50*time.Millisecond
	b := setup(t, cfg)
	b.start(t)
	locked := b.insert(t, fsm.With(struct{}{}), nil) // the lower id: locked first in id order
	other := b.insert(t, fsm.With(struct{}{}), nil)
	waitFor(t, "both steps to start", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return starts[locked] == 1 && starts[other] == 1
	})
	tx, err := b.pool.Begin(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if err := b.client.SignalTx(ctxT(t), tx, durable.ByID(locked), "note", nil, ""); err != nil {
		t.Fatal(err)
	}
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
	// The locked row's lease has expired meanwhile (leases are in the
	// database's time), unextended: its claim, skipped by every heartbeat
	// since SignalTx, must not have been taken for lost.
	if until := b.get(t, locked).LeaseExpiresAt; !until.Equal(lockedUntil) {
		t.Fatalf("the locked instance's lease changed from %v to %v under the caller's lock", lockedUntil, until)
	}
	mu.Lock()
	n, lost := starts[other], cancelled[locked]
	mu.Unlock()
	if n != 1 {
		t.Errorf("the unlocked instance's step started %d times while another row was locked, want 1", n)
	}
	if lost {
		t.Error("the locked instance's step was cancelled as if its lease were lost")
	}
	if got := b.get(t, locked); got.Status != durable.StatusExecuting || got.Attempt != 1 {
		t.Errorf("locked instance: %s attempt %d, want still executing its first attempt", got.Status, got.Attempt)
	}
	if err := tx.Commit(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	close(release)
	if in := b.waitStatus(t, other, durable.StatusDone); in.Attempt != 1 {
		t.Errorf("unlocked instance done at attempt %d, want 1", in.Attempt)
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
