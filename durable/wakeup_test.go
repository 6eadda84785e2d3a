package durable_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem/durable"
)

// Rows that become runnable behind the back of the engines serving their
// queue (handed back by a stopping engine, reaped by an engine that does
// not serve the queue) wake those engines at once, not at their next poll:
// they send the wake-up hint those engines listen for, and the rows get
// done by an engine that polls hourly.

// idleEngine starts a second engine on b's schema serving queue, whose
// polls and reaps are far beyond the test: it picks rows up only when
// woken. Its listener, once LISTENing, pokes its picker once more, which
// may come after the test has made rows runnable: that the idle engine
// ran them does not show a hint woke it, so the tests hear the hint
// themselves (listenForHints).
func idleEngine(t *testing.T, b *testBundle, cfg *durable.Config, queue string) {
	t.Helper()
	c := *cfg
	c.ID = "idle"
	c.PollInterval, c.ReaperInterval = time.Hour, time.Hour
	c.Queues = map[string]durable.QueueConfig{queue: {Concurrency: 4}}
	rec := &recorder{}
	startClient(t, newClient(t, newPool(t, b.url), &c, rec))
	// Its first pick is done; it waits. A loaded machine may take a while
	// to get there.
	waitFor(t, "the idle engine's first pick", func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return len(rec.picks) > 0
	})
}

// hintListener LISTENs for wake-up hints as another engine does, from
// now on: hints sent before it are behind it.
type hintListener struct {
	conn   *pgxpool.Conn
	schema string
}

func listenForHints(t *testing.T, b *testBundle) *hintListener {
	t.Helper()
	conn, err := b.pool.Acquire(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Release)
	l := &hintListener{conn: conn}
	if err := conn.QueryRow(ctxT(t), "SELECT current_schema()").Scan(&l.schema); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctxT(t), "LISTEN durable_wakeup"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Exec(context.Background(), "UNLISTEN *") }) // before the Release
	return l
}

// wait waits up to 10 s for a hint naming queue in the bundle's schema.
func (l *hintListener) wait(t *testing.T, queue, what string) {
	t.Helper()
	ctx, stop := context.WithTimeout(ctxT(t), 10*time.Second)
	defer stop()
	for {
		n, err := l.conn.Conn().WaitForNotification(ctx)
		if err != nil {
			t.Fatalf("no wake-up hint for %s: %v", what, err)
		}
		if n.Payload == l.schema+":"+queue {
			return
		}
	}
}

// waitDone waits up to 10 s (the idle engine polls hourly) for n rows done.
func waitDone(t *testing.T, b *testBundle, n int, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for b.count(t, "SELECT count(*) FROM durable_instance WHERE status = 'done'") < n {
		if time.Now().After(deadline) {
			t.Fatalf("%s: the idle engine was not woken", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestRowsHandedBackWakeOtherEngines(t *testing.T) {
	t.Parallel()
	block := make(chan struct{})
	var first atomic.Bool
	fsm := mustFSM(t, durable.FSMConfig[struct{}]{
		Name: "handed-back", Initial: "a",
		Steps: map[string]durable.StepFunc[struct{}]{
			"a": func(context.Context, *durable.Step[struct{}]) (durable.Outcome, error) {
				if first.CompareAndSwap(false, true) {
					<-block // the first run holds the engine's only worker
				}
				return durable.Done(nil), nil
			},
		},
	})
	cfg := fast(fsm)
	cfg.Queues = map[string]durable.QueueConfig{durable.DefaultQueue: {Concurrency: 1, Prefetch: 5}}
	b := setup(t, cfg)
	for range 6 {
		b.insert(t, fsm.With(struct{}{}), nil)
	}
	startClient(t, b.client)
	var unblock sync.Once
	t.Cleanup(func() { unblock.Do(func() { close(block) }) }) // before the engine's Stop
	waitFor(t, "six claimed", func() bool {
		return b.count(t, "SELECT count(*) FROM durable_instance WHERE status = 'executing'") == 6
	})
	idleEngine(t, b, cfg, durable.DefaultQueue)
	// The idle engine may still pick once more, after its LISTEN, and find
	// the rows without the hint: the hint is heard here, from now on (the
	// inserts' hints are behind us).
	hints := listenForHints(t, b)
	stopped := make(chan error, 1)
	go func() { stopped <- b.client.Stop(context.Background()) }()
	waitFor(t, "five handed back", func() bool {
		b.events.mu.Lock()
		defer b.events.mu.Unlock()
		return len(b.events.drains) > 0 && b.events.drains[0].Released == 5
	})
	hints.wait(t, durable.DefaultQueue, "the rows a stopping engine handed back")
	unblock.Do(func() { close(block) })
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	waitDone(t, b, 6, "five rows handed back by a stopping engine")
}

func TestReapedRowsWakeTheEnginesOfTheirQueue(t *testing.T) {
	t.Parallel()
	fsm := mustFSM(t, durable.FSMConfig[struct{}]{
		Name: "reaped", Initial: "a", Queue: "elsewhere",
		Steps: map[string]durable.StepFunc[struct{}]{
			"a": func(context.Context, *durable.Step[struct{}]) (durable.Outcome, error) { return durable.Done(nil), nil },
		},
	})
	cfg := fast(fsm)
	cfg.ReaperInterval = 20 * time.Millisecond
	b := setup(t, cfg) // serves the default queue only, and reaps
	idleEngine(t, b, cfg, "elsewhere")
	id := b.insert(t, fsm.With(struct{}{}), &durable.InsertOpts{ScheduleIn: time.Hour})
	// A row claimed by an engine that died: its lease has run out.
	b.exec(t, `UPDATE durable_instance SET status = 'executing', eligible_at = now(), lease_owner = 'dead',
		lease_expires_at = now() - interval '1 second', claims = claims + 1 WHERE id = $1`, id)
	hints := listenForHints(t, b) // the idle engine may pick once more after its LISTEN
	startClient(t, b.client)
	hints.wait(t, "elsewhere", "the reaped row")
	waitDone(t, b, 1, "a row reaped by an engine that does not serve its queue")
}

// A row handed back because the engine's hard stop failed its step sends
// the wake-up hint the other engines serving its queue listen for, as the
// rows a graceful stop hands back do.
func TestRowsHandedBackByAHardStopSendAWakeUpHint(t *testing.T) {
	t.Parallel()
	running := make(chan struct{})
	fsm := mustFSM(t, durable.FSMConfig[struct{}]{
		Name: "hard-stopped", Initial: "a",
		Steps: map[string]durable.StepFunc[struct{}]{
			"a": func(ctx context.Context, _ *durable.Step[struct{}]) (durable.Outcome, error) {
				close(running)
				<-ctx.Done() // fails once the hard stop cancels it
				return durable.Outcome{}, ctx.Err()
			},
		},
	})
	b := setup(t, fast(fsm))
	id := b.insert(t, fsm.With(struct{}{}), nil)
	startClient(t, b.client)
	// Running, not only claimed (executing in the table): a row claimed
	// and not yet running is handed back with no step event.
	select {
	case <-running:
	case <-time.After(10 * time.Second):
		t.Fatal("the step did not start")
	}

	hints := listenForHints(t, b) // the insert's hint is behind us

	hard, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.client.Stop(hard); err == nil {
		t.Fatal("Stop with an ended context returned nil")
	}
	if steps := b.events.stepEvents(); len(steps) != 1 || !steps[0].HandedBack {
		t.Fatalf("step events %+v, want one handed back", steps)
	}
	if in := b.get(t, id); in.Status != durable.StatusRunnable {
		t.Fatalf("the handed-back row is %s, want runnable", in.Status)
	}
	hints.wait(t, durable.DefaultQueue, "the handed-back row")
}
