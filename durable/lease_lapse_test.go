package durable_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem/durable"
	"github.com/idemgo/idem/internal/syncbuf"
)

// heartbeatHang makes the heartbeat statements of a pool hang, as behind a
// network partition: while on, each waits for its context to end (pgx then
// gives up on it, as it would on a silent connection) or for the hang to
// be lifted. It records when each heartbeat was sent, with its deadline,
// and when the last one that succeeded was sent.
type heartbeatHang struct {
	on     atomic.Bool
	lifted chan struct{}
	once   sync.Once

	mu     sync.Mutex
	lastOK time.Time // when the last heartbeat that succeeded was sent
	hung   []hungBeat
}

// hungBeat is a heartbeat that hung: when it was sent, and its deadline.
type hungBeat struct {
	sent, deadline time.Time
	hasDeadline    bool
}

type sentAt struct{}

func newHeartbeatHang() *heartbeatHang { return &heartbeatHang{lifted: make(chan struct{})} }

// lift ends the hang for good.
func (h *heartbeatHang) lift() {
	h.on.Store(false)
	h.once.Do(func() { close(h.lifted) })
}

func (h *heartbeatHang) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if data.SQL != durable.HeartbeatSQL {
		return ctx
	}
	now := time.Now()
	if h.on.Load() {
		dl, ok := ctx.Deadline()
		h.mu.Lock()
		h.hung = append(h.hung, hungBeat{sent: now, deadline: dl, hasDeadline: ok})
		h.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-h.lifted:
		}
	}
	return context.WithValue(ctx, sentAt{}, now)
}

func (h *heartbeatHang) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	sent, ok := ctx.Value(sentAt{}).(time.Time)
	if !ok || data.Err != nil {
		return
	}
	h.mu.Lock()
	if sent.After(h.lastOK) {
		h.lastOK = sent
	}
	h.mu.Unlock()
}

// state returns when the last heartbeat that succeeded was sent and the
// heartbeats that hung.
func (h *heartbeatHang) state() (time.Time, []hungBeat) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lastOK, append([]hungBeat(nil), h.hung...)
}

// hangingPool is a pool on url whose heartbeats h can make hang.
func hangingPool(t *testing.T, url string, h *heartbeatHang) *pgxpool.Pool {
	return testPool(t, url, func(pc *pgxpool.Config) { pc.ConnConfig.Tracer = h })
}

// A heartbeat that hangs (the database behind a network partition) must
// not keep a step running past its lease, which another engine's reaper
// may then take back and run again: each heartbeat is bounded by the
// moment the lease may lapse (a LeaseTTL after the last extension that
// succeeded, or the claim, was sent, on this process's clock), and the
// step's context is cancelled then, with ErrLeaseLost as its cause.
func TestHungHeartbeatCancelsTheStepWhenItsLeaseMayLapse(t *testing.T) {
	t.Parallel()
	type cancelled struct {
		at    time.Time
		cause error
	}
	started, gotCancel, done := make(chan time.Time, 1), make(chan cancelled, 1), make(chan struct{})
	defer close(done)
	var runs, handled atomic.Int32
	fsm := mustFSM(t, durable.FSMConfig[int]{
		Name: "partitioned", Initial: "a",
		Steps: map[string]durable.StepFunc[int]{
			"a": func(ctx context.Context, s *durable.Step[int]) (durable.Outcome, error) {
				if runs.Add(1) > 1 {
					return durable.Done(nil), nil
				}
				started <- time.Now()
				select {
				case <-ctx.Done():
					gotCancel <- cancelled{time.Now(), context.Cause(ctx)}
				case <-done:
				}
				return durable.Outcome{}, ctx.Err()
			},
		},
		OnError: func(context.Context, *durable.Step[int], error) durable.Outcome {
			handled.Add(1)
			return durable.Retry(0)
		},
	})
	// Beats well within the lease: one late by a second on a loaded
	// machine does not let it lapse before the hang begins; and once it
	// does, a heartbeat bounded by a LeaseTTL from when it was sent (not
	// from the last success) would end a beat's time after the lapse.
	const ttl = 3 * time.Second
	cfg := fast(fsm)
	cfg.LeaseTTL, cfg.HeartbeatInterval, cfg.ReaperInterval = ttl, time.Second, time.Hour
	b := setup(t, nil)
	hang := newHeartbeatHang()
	rec := &recorder{}
	engine := newClient(t, hangingPool(t, b.url, hang), cfg, rec)
	startClient(t, engine)
	t.Cleanup(hang.lift) // before Stop, which waits for a hung heartbeat

	id := b.insert(t, fsm.With(0), nil)
	start := <-started // the claim was sent before
	hang.on.Store(true)

	var got cancelled
	select {
	case got = <-gotCancel:
	case <-time.After(ttl + 20*time.Second):
		t.Fatal("the step's context was not cancelled while its heartbeats hung")
	}
	lastOK, hung := hang.state()
	// The lease may lapse a LeaseTTL after the later of the claim (sent
	// before the step started) and the last extension that succeeded.
	lapse := start
	if lastOK.After(lapse) {
		lapse = lastOK
	}
	lapse = lapse.Add(ttl)
	if !errors.Is(got.cause, durable.ErrLeaseLost) {
		t.Errorf("the step's context was cancelled with cause %v, want ErrLeaseLost", got.cause)
	}
	// The step sees the cancellation a little after it happened: allow
	// a loaded machine a second to schedule it.
	if late := got.at.Sub(lapse); late > time.Second {
		t.Errorf("the step's context was cancelled %v after its lease may have lapsed", late)
	}
	if len(hung) == 0 {
		t.Fatal("no heartbeat hung")
	}
	for _, beat := range hung {
		if beat.sent.After(lapse.Add(-cfg.HeartbeatInterval)) {
			// The lease may have lapsed already (the claim was sent a
			// little before the step started): such a beat may try
			// again, bounded by the interval.
			continue
		}
		if !beat.hasDeadline || beat.deadline.After(lapse) {
			t.Errorf("a heartbeat sent %v before the lease may lapse has deadline %v after it (has one: %v)",
				lapse.Sub(beat.sent), beat.deadline.Sub(lapse), beat.hasDeadline)
		}
	}

	// The step failed for want of its lease, not by its own fault: the
	// row, still this engine's (no reaper runs), is handed back with its
	// attempt unchanged and runs again, rather than spending an attempt
	// (at the last one, failing the instance for good).
	// The event of the run handed back may come after that of the run
	// again: its hook is called once the row is runnable, which another
	// worker may then pick, run and report first.
	var evs []durable.StepStopEvent
	waitFor(t, "the events of both runs", func() bool {
		evs = evs[:0]
		for _, e := range rec.stepEvents() {
			if e.ID == id {
				evs = append(evs, e)
			}
		}
		return len(evs) >= 2
	})
	ev := evs[0]
	if ev.Kind == durable.KindDone {
		ev = evs[1]
	}
	if !ev.HandedBack || ev.Kind != "" || !errors.Is(ev.Err, context.Canceled) {
		t.Errorf("step event %+v, want HandedBack with the step's error and no kind", ev)
	}
	if in := b.waitStatus(t, id, durable.StatusDone); in.Attempt != 1 {
		t.Errorf("done at attempt %d, want 1: the lapse was charged to the step", in.Attempt)
	}
	if n := handled.Load(); n != 0 {
		t.Errorf("OnError was called %d times for a step handed back", n)
	}
}

// holdFirstRun is a step that, on the first of the runs that runs counts,
// sends on started and holds until ctx is done or done is closed, then
// fails with ctx's error; any later run is done at once.
func holdFirstRun(ctx context.Context, runs *atomic.Int32, started, done chan struct{}) (durable.Outcome, error) {
	if runs.Add(1) == 1 {
		started <- struct{}{}
		select {
		case <-ctx.Done():
		case <-done:
		}
		return durable.Outcome{}, ctx.Err()
	}
	return durable.Done(nil), nil
}

// A claim whose lease may have lapsed while it waited in the buffer, no
// heartbeat extending it, is not run: another engine may have taken the
// row back by then. It is handed back, its attempt unchanged, and runs
// under a claim of its own.
func TestClaimWhoseLeaseLapsedInTheBufferDoesNotRun(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	type run struct {
		attempt int
		claims  int64
	}
	started, ran, done := make(chan struct{}, 1), make(chan run, 4), make(chan struct{})
	defer close(done)
	var firstRuns atomic.Int32
	fsm := mustFSM(t, durable.FSMConfig[string]{
		Name: "buffered", Initial: "a",
		Steps: map[string]durable.StepFunc[string]{
			"a": func(ctx context.Context, s *durable.Step[string]) (durable.Outcome, error) {
				if s.State == "first" {
					return holdFirstRun(ctx, &firstRuns, started, done) // holds the worker until its lease lapses
				}
				var claims int64
				if err := b.pool.QueryRow(ctx, "SELECT claims FROM durable_instance WHERE id = $1", s.ID).Scan(&claims); err != nil {
					return durable.Outcome{}, err
				}
				ran <- run{s.Attempt, claims}
				return durable.Done(nil), nil
			},
		},
	})
	first := b.insert(t, fsm.With("first"), nil)
	second := b.insert(t, fsm.With("second"), nil)

	// One worker, and room to claim the second instance ahead, in the
	// same statement as the first.
	const ttl = 2 * time.Second
	cfg := fast(fsm)
	cfg.Queues = map[string]durable.QueueConfig{durable.DefaultQueue: {Concurrency: 1, Prefetch: 1}}
	cfg.LeaseTTL, cfg.HeartbeatInterval, cfg.ReaperInterval = ttl, 500*time.Millisecond, time.Hour
	hang := newHeartbeatHang()
	engine := newClient(t, hangingPool(t, b.url, hang), cfg, &recorder{})
	startClient(t, engine)
	t.Cleanup(hang.lift)
	<-started
	hang.on.Store(true)

	var got run
	select {
	case got = <-ran:
	case <-time.After(ttl + 20*time.Second):
		t.Fatal("the second instance's step did not run")
	}
	if got.attempt != 1 || got.claims != 2 {
		t.Errorf("the second instance's step ran at attempt %d under claim %d, want attempt 1 under claim 2: "+
			"its first claim, lapsed in the buffer, was run", got.attempt, got.claims)
	}
	if in := b.waitStatus(t, second, durable.StatusDone); in.Attempt != 1 {
		t.Errorf("the second instance is done at attempt %d, want 1", in.Attempt)
	}
	hang.lift()
	b.waitStatus(t, first, durable.StatusDone)
}

// A step whose lease lapsed because a caller's transaction held its row's
// lock, and which could not be handed back within LeaseTTL because the
// lock was still held, is logged as a warning that names the lapse and
// the lock, not as an error of the engine's: the row is left to the
// reaper, which runs the step again once the lock is released.
func TestHandBackOfALapsedStepWhoseRowStaysLockedWarns(t *testing.T) {
	t.Parallel()
	started, done := make(chan struct{}, 1), make(chan struct{})
	defer close(done)
	var runs atomic.Int32
	fsm := mustFSM(t, durable.FSMConfig[struct{}]{
		Name: "lapsing", Initial: "a",
		Steps: map[string]durable.StepFunc[struct{}]{
			"a": func(ctx context.Context, s *durable.Step[struct{}]) (durable.Outcome, error) {
				return holdFirstRun(ctx, &runs, started, done)
			},
		},
	})
	const ttl = 300 * time.Millisecond
	cfg := fast(fsm)
	cfg.LeaseTTL, cfg.HeartbeatInterval, cfg.ReaperInterval = ttl, 50*time.Millisecond, 50*time.Millisecond
	logs := &syncbuf.Buffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	b := setup(t, cfg)
	b.start(t)
	id := b.insert(t, fsm.With(struct{}{}), nil)
	<-started

	tx, _ := beginTx(t, b)
	if err := b.client.SignalTx(ctxT(t), tx, durable.ByID(id), "go", nil, ""); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the hand-back to give up", func() bool {
		for _, e := range b.events.stepEvents() {
			if e.CommitErr != nil {
				return true
			}
		}
		return false
	})
	if err := tx.Rollback(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	b.waitStatus(t, id, durable.StatusDone)
	var warned bool
	for line := range strings.Lines(logs.String()) {
		if !strings.Contains(line, "hand") {
			continue
		}
		if strings.Contains(line, "level=ERROR") {
			t.Errorf("logged as an error: %s", line)
		}
		warned = warned || strings.Contains(line, "level=WARN") &&
			strings.Contains(line, "lapse of its lease") && strings.Contains(line, "locked")
	}
	if !warned {
		t.Errorf("no warning naming the lapse of the lease and the lock:\n%s", logs.String())
	}
}
