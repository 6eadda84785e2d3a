package durable_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgo/idem/durable"
)

// ckState names the instance's concurrency key, for the overlap counter,
// and whether it waits at a barrier.
type ckState struct {
	Key     string `json:"key"`
	Barrier bool   `json:"barrier,omitempty"`
}

// overlaps counts the steps running per key and keeps the maximum.
type overlaps struct {
	mu      sync.Mutex
	running map[string]int
	max     map[string]int
	done    map[string]int
}

func newOverlaps() *overlaps {
	return &overlaps{running: map[string]int{}, max: map[string]int{}, done: map[string]int{}}
}

func (o *overlaps) enter(k string) {
	o.mu.Lock()
	o.running[k]++
	o.max[k] = max(o.max[k], o.running[k])
	o.mu.Unlock()
}

func (o *overlaps) leave(k string) {
	o.mu.Lock()
	o.running[k]--
	o.done[k]++
	o.mu.Unlock()
}

func (o *overlaps) get(k string) (maxRunning, done int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.max[k], o.done[k]
}

// ckFSM runs one step that holds its key's slot for hold (or, with
// Barrier, until barrier is released) and ends done.
func ckFSM(t testing.TB, o *overlaps, hold time.Duration, barrier <-chan struct{}) *durable.FSM[ckState] {
	return mustFSM(t, durable.FSMConfig[ckState]{
		Name:    "ck",
		Initial: "run",
		Steps: map[string]durable.StepFunc[ckState]{
			"run": func(ctx context.Context, s *durable.Step[ckState]) (durable.Outcome, error) {
				o.enter(s.State.Key)
				defer o.leave(s.State.Key)
				if s.State.Barrier {
					select {
					case <-barrier:
					case <-ctx.Done():
						return durable.Stop("cancelled"), ctx.Err()
					}
				} else {
					time.Sleep(hold)
				}
				return durable.Done(nil), nil
			},
		},
	})
}

// contention records ConcurrencyContended events.
type contention struct {
	mu  sync.Mutex
	evs []durable.ConcurrencyContendedEvent
}

func (c *contention) hook(ev durable.ConcurrencyContendedEvent) {
	c.mu.Lock()
	c.evs = append(c.evs, ev)
	c.mu.Unlock()
}

func (c *contention) events() []durable.ConcurrencyContendedEvent {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]durable.ConcurrencyContendedEvent(nil), c.evs...)
}

// twoEngines starts two engines on one database with cfg, the first being
// the bundle's, and returns the bundle.
func twoEngines(t *testing.T, cfg *durable.Config) *testBundle {
	t.Helper()
	b := setup(t, cfg)
	b.start(t)
	c2 := *cfg
	c2.ID = "second"
	startClient(t, newClient(t, b.pool, &c2, &recorder{}))
	return b
}

func TestConcurrencyKeyOneAtATime(t *testing.T) {
	o := newOverlaps()
	barrier := make(chan struct{})
	ck := ckFSM(t, o, 15*time.Millisecond, barrier)
	var cont contention
	cfg := fast(ck)
	cfg.Hooks.ConcurrencyContended = cont.hook
	b := twoEngines(t, cfg)

	// A backlog of one key, ahead of everything else in the queue.
	const n = 24
	var ids []int64
	for range n {
		ids = append(ids, b.insert(t, ck.With(ckState{Key: "k"}), &durable.InsertOpts{ConcurrencyKey: "k", Priority: -1}))
	}
	// Unrelated rows, each with its own key or none, that can only pass
	// their barrier together: they must run in parallel beside the
	// backlog.
	var others []int64
	for _, k := range []string{"a", "b", ""} {
		others = append(others, b.insert(t, ck.With(ckState{Key: "other", Barrier: true}), &durable.InsertOpts{ConcurrencyKey: k}))
	}
	waitFor(t, "the unrelated rows to run together", func() bool {
		m, _ := o.get("other")
		return m == 3
	})
	if _, done := o.get("k"); done == n {
		t.Log("the backlog finished before the unrelated rows ran together")
	}
	close(barrier)
	for _, id := range append(others, ids...) {
		b.waitStatus(t, id, durable.StatusDone)
	}
	if m, done := o.get("k"); m != 1 || done != n {
		t.Fatalf("key k: at most %d at once (want 1), %d steps done (want %d)", m, done, n)
	}
	evs := cont.events()
	if len(evs) == 0 {
		t.Fatal("no ConcurrencyContended event")
	}
	for _, ev := range evs {
		if ev.Key != "k" || ev.Queue != durable.DefaultQueue || ev.Count < 1 || ev.Limit != 1 || ev.Worker == "" {
			t.Fatalf("event %+v", ev)
		}
	}
}

func TestConcurrencyLimitAboveOne(t *testing.T) {
	o := newOverlaps()
	// Steps long enough that, with a backlog, the limit is reached even
	// on a loaded machine: three workers must claim within one step's
	// time (at 30 ms, -race beside other packages sometimes saw two).
	ck := ckFSM(t, o, 200*time.Millisecond, nil)
	var cont contention
	cfg := fast(ck)
	cfg.ConcurrencyLimits = map[string]int{"lim:": 2, "lim:three": 3}
	cfg.Hooks.ConcurrencyContended = cont.hook
	b := twoEngines(t, cfg)

	const n = 12
	var ids []int64
	for _, k := range []string{"lim:x", "lim:three", "plain"} {
		for range n {
			ids = append(ids, b.insert(t, ck.With(ckState{Key: k}), &durable.InsertOpts{ConcurrencyKey: k}))
		}
	}
	for _, id := range ids {
		b.waitStatus(t, id, durable.StatusDone)
	}
	for k, want := range map[string]int{"lim:x": 2, "lim:three": 3, "plain": 1} {
		// Two engines of 4 workers each have room for more: the limit is
		// what holds them back, and with a backlog it is reached.
		if m, done := o.get(k); m != want || done != n {
			t.Errorf("key %s: at most %d at once (want %d), %d done (want %d)", k, m, want, done, n)
		}
	}
	limits := map[string]int{}
	for _, ev := range cont.events() {
		limits[ev.Key] = ev.Limit
	}
	for k, want := range map[string]int{"lim:x": 2, "lim:three": 3, "plain": 1} {
		if got, ok := limits[k]; ok && got != want {
			t.Errorf("contention events give key %s the limit %d, want %d", k, got, want)
		}
	}
}

// Many pickers racing for one key: the unique index keeps it to one
// executing row, and a lost race is a skip, not an error or a stall.
func TestConcurrencyKeyRace(t *testing.T) {
	o := newOverlaps()
	ck := ckFSM(t, o, time.Millisecond, nil)
	cfg := fast(ck)
	cfg.PollOnly = true
	cfg.PollInterval = 2 * time.Millisecond
	b := setup(t, cfg)
	b.start(t)
	for i := range 3 {
		c := *cfg
		c.ID = fmt.Sprintf("racer-%d", i)
		startClient(t, newClient(t, b.pool, &c, &recorder{}))
	}
	const n = 30
	var ids []int64
	for range n {
		ids = append(ids, b.insert(t, ck.With(ckState{Key: "hot"}), &durable.InsertOpts{ConcurrencyKey: "hot"}))
	}
	for _, id := range ids {
		b.waitStatus(t, id, durable.StatusDone)
	}
	if m, done := o.get("hot"); m != 1 || done != n {
		t.Fatalf("at most %d at once (want 1), %d done (want %d)", m, done, n)
	}
	if got := b.count(t, "SELECT count(*) FROM durable_instance WHERE status <> 'done'"); got != 0 {
		t.Fatalf("%d rows not done", got)
	}
}

func TestConcurrencyLimitsValidated(t *testing.T) {
	b := setup(t, nil)
	for _, n := range []int{0, -1} {
		_, err := durable.NewClient(b.pool, &durable.Config{ConcurrencyLimits: map[string]int{"k": n}})
		if !errors.Is(err, durable.ErrInvalidConfig) {
			t.Errorf("limit %d: err %v, want ErrInvalidConfig", n, err)
		}
	}
}

// The database itself keeps one executing row per key and slot, whatever
// writes it.
func TestConcurrencyKeyIndex(t *testing.T) {
	ck := ckFSM(t, newOverlaps(), 0, nil)
	b := setup(t, nil)
	for range 2 {
		b.insert(t, ck.With(ckState{Key: "k"}), &durable.InsertOpts{ConcurrencyKey: "k"})
	}
	_, err := b.pool.Exec(ctxT(t), "UPDATE durable_instance SET status = 'executing' WHERE concurrency_key = 'k'")
	if err == nil || !strings.Contains(err.Error(), "durable_instance_concurrency_idx") {
		t.Fatalf("two executing rows of one key: %v, want a unique violation", err)
	}
}

// Migrating a database whose engines ran before keys were enforced: rows
// of one key executing together get distinct slots, so the index can be
// built, and the key takes no new lease until it is under its limit.
func TestConcurrencyMigrationWithExecutingRows(t *testing.T) {
	o := newOverlaps()
	ck := ckFSM(t, o, 0, nil)
	b := setup(t, fast(ck))
	// Back to the schema before 002.
	b.exec(t, "DROP INDEX durable_instance_concurrency_idx")
	b.exec(t, "ALTER TABLE durable_instance DROP COLUMN concurrency_slot")
	b.exec(t, "DELETE FROM durable_migration WHERE version = 2")
	var ids []int64
	for range 3 {
		ids = append(ids, b.insert(t, ck.With(ckState{Key: "k"}), &durable.InsertOpts{ConcurrencyKey: "k"}))
	}
	b.exec(t, `UPDATE durable_instance SET status = 'executing', lease_owner = 'old', lease_expires_at = now() + interval '1 hour'
		WHERE id = ANY ($1)`, ids[:2])
	if err := b.client.Migrate(ctxT(t)); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	if n := b.count(t, "SELECT count(DISTINCT concurrency_slot) FROM durable_instance WHERE status = 'executing'"); n != 2 {
		t.Fatalf("%d distinct slots among the 2 executing rows", n)
	}
	b.start(t)
	time.Sleep(100 * time.Millisecond) // ten polls
	if in := b.get(t, ids[2]); in.Status != durable.StatusRunnable {
		t.Fatalf("the third row of a key over its limit is %s, want runnable", in.Status)
	}
	// Once the old leases are gone, it runs.
	b.exec(t, "UPDATE durable_instance SET status = 'done', finished_at = now(), lease_owner = NULL, lease_expires_at = NULL WHERE id = ANY ($1)", ids[:2])
	b.waitStatus(t, ids[2], durable.StatusDone)
}
