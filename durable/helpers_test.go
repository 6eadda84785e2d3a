package durable_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem/durable"
	"github.com/idemgo/idem/internal/pgtest"
)

// testBundle is what a test gets from setup: a fresh schema, a pool on it,
// a migrated client and the events its hooks saw.
type testBundle struct {
	url    string
	pool   *pgxpool.Pool
	client *durable.Client
	events *recorder
}

// fast is the base engine configuration of the tests: quick polls, one
// queue, no log output.
func fast(fsms ...durable.Definition) *durable.Config {
	return &durable.Config{
		FSMs:         fsms,
		Queues:       map[string]durable.QueueConfig{durable.DefaultQueue: {Concurrency: 4}},
		PollInterval: 10 * time.Millisecond,
		LeaseTTL:     10 * time.Second,
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

// setup gives t a fresh schema, a pool and a migrated client with cfg
// (nil: insert-only), its hooks feeding the bundle's recorder.
func setup(t *testing.T, cfg *durable.Config) *testBundle {
	t.Helper()
	url := pgtest.URL(t)
	b := &testBundle{url: url, pool: newPool(t, url), events: &recorder{}}
	b.client = newClient(t, b.pool, cfg, b.events)
	if err := b.client.Migrate(ctxT(t)); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return b
}

// newClient makes a client with cfg whose hooks feed rec.
func newClient(t *testing.T, pool *pgxpool.Pool, cfg *durable.Config, rec *recorder) *durable.Client {
	t.Helper()
	if cfg == nil {
		cfg = &durable.Config{}
	}
	c := *cfg
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	rec.hook(&c.Hooks)
	client, err := durable.NewClient(pool, &c)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// newPool opens a pool on url, closed when t ends.
func newPool(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	pc.MaxConns = 16
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// ctxT is a context that ends with t, or after a minute.
func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// start starts b's engine and stops it when t ends.
func (b *testBundle) start(t *testing.T) {
	t.Helper()
	startClient(t, b.client)
}

func startClient(t *testing.T, c *durable.Client) {
	t.Helper()
	if err := c.Start(ctxT(t)); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
}

// get reads instance id.
func (b *testBundle) get(t *testing.T, id int64) *durable.Instance {
	t.Helper()
	in, err := b.client.Get(ctxT(t), id)
	if err != nil {
		t.Fatalf("Get(%d): %v", id, err)
	}
	return in
}

// insert inserts an instance, failing t on error.
func (b *testBundle) insert(t *testing.T, args durable.Args, opts *durable.InsertOpts) int64 {
	t.Helper()
	id, err := b.client.Insert(ctxT(t), args, opts)
	if err != nil {
		t.Fatalf("Insert: %v", err)
	}
	return id
}

// signal signals, failing t on error.
func (b *testBundle) signal(t *testing.T, target durable.Target, name string, payload any, dedup string) {
	t.Helper()
	if err := b.client.Signal(ctxT(t), target, name, payload, dedup); err != nil {
		t.Fatalf("Signal(%v, %q): %v", target, name, err)
	}
}

// count runs a count query.
func (b *testBundle) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := b.pool.QueryRow(ctxT(t), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// exec runs a statement.
func (b *testBundle) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	if _, err := b.pool.Exec(ctxT(t), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// closeAtCleanup closes ch when the test ends, unless the test has: a
// step held on it returns, so that the engine can stop.
func closeAtCleanup(t *testing.T, ch chan struct{}) {
	t.Cleanup(func() {
		select {
		case <-ch:
		default:
			close(ch)
		}
	})
}

// waitFor waits until cond holds, checking every few milliseconds, and
// fails t after 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitStatus waits until instance id has status and returns it.
func (b *testBundle) waitStatus(t *testing.T, id int64, status durable.Status) *durable.Instance {
	t.Helper()
	var in *durable.Instance
	waitFor(t, "instance to be "+string(status), func() bool {
		in = b.get(t, id)
		return in.Status == status
	})
	return in
}

// recorder keeps the hooks' events.
type recorder struct {
	mu     sync.Mutex
	steps  []durable.StepStopEvent
	picks  []durable.PickStopEvent
	drains []durable.DrainEvent
	reaped []durable.ReapedEvent
	swept  []durable.SweptEvent
}

func (r *recorder) hook(h *durable.Hooks) {
	h.StepStop = func(e durable.StepStopEvent) { r.mu.Lock(); r.steps = append(r.steps, e); r.mu.Unlock() }
	h.PickStop = func(e durable.PickStopEvent) { r.mu.Lock(); r.picks = append(r.picks, e); r.mu.Unlock() }
	h.SchedulerDrain = func(e durable.DrainEvent) { r.mu.Lock(); r.drains = append(r.drains, e); r.mu.Unlock() }
	h.ReaperReaped = func(e durable.ReapedEvent) { r.mu.Lock(); r.reaped = append(r.reaped, e); r.mu.Unlock() }
	h.GCSwept = func(e durable.SweptEvent) { r.mu.Lock(); r.swept = append(r.swept, e); r.mu.Unlock() }
}

// stepEvents returns the StepStop events so far.
func (r *recorder) stepEvents() []durable.StepStopEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]durable.StepStopEvent(nil), r.steps...)
}

// mustFSM builds an FSM or fails t.
func mustFSM[S any](t testing.TB, cfg durable.FSMConfig[S]) *durable.FSM[S] {
	t.Helper()
	f, err := durable.NewFSM(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// ctl is the control FSM most tests drive with signals: it parks at once
// awaiting "go", "finish" and "fail". "go" is recorded in the state and it
// parks again; "finish" ends it done with the signal's payload as result;
// "fail" stops it.
type ctlState struct {
	Seen []string `json:"seen,omitempty"`
}

var ctlAwaits = []string{"go", "finish", "fail"}

func ctlFSM(t testing.TB) *durable.FSM[ctlState] {
	return mustFSM(t, durable.FSMConfig[ctlState]{
		Name:    "ctl",
		Initial: "start",
		Steps: map[string]durable.StepFunc[ctlState]{
			"start": func(ctx context.Context, s *durable.Step[ctlState]) (durable.Outcome, error) {
				return durable.Await("got", ctlAwaits...), nil
			},
			"got": func(ctx context.Context, s *durable.Step[ctlState]) (durable.Outcome, error) {
				for _, sig := range s.Awaited {
					switch sig.Name {
					case "finish":
						return durable.Done(json.RawMessage(sig.Payload)), nil
					case "fail":
						return durable.Stop("failed by signal"), nil
					}
					s.State.Seen = append(s.State.Seen, string(sig.Payload))
				}
				return durable.Await("got", ctlAwaits...), nil
			},
		},
	})
}
