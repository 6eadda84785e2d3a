package durable_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem/durable"
)

// These tests kill engines in the middle of steps and pin what the design
// promises: no instance is lost, every interrupted step runs again once
// its lease has expired, and no outcome is committed twice.

// faultLease is the lease of the engines these tests kill: short, so that
// the survivors' reapers take their rows back quickly.
const faultLease = 2 * time.Second

// faultState is the state of the fault FSM.
type faultState struct {
	N int `json:"n"`
}

// faultFSM is the FSM the tests kill engines in: one step, "work", that
// runs fn and ends the instance with the name of the engine that ran it.
func faultFSM(t testing.TB, engine string, fn func(ctx context.Context, s *durable.Step[faultState])) *durable.FSM[faultState] {
	return mustFSM(t, durable.FSMConfig[faultState]{
		Name: "fault", Initial: "work",
		Steps: map[string]durable.StepFunc[faultState]{
			"work": func(ctx context.Context, s *durable.Step[faultState]) (durable.Outcome, error) {
				fn(ctx, s)
				return durable.Done(engine), nil
			},
		},
	})
}

// faultConfig is the configuration of the engines of these tests.
func faultConfig(def durable.Definition, concurrency int) *durable.Config {
	cfg := fast(def)
	cfg.Queues = map[string]durable.QueueConfig{durable.DefaultQueue: {Concurrency: concurrency}}
	cfg.LeaseTTL = faultLease
	cfg.HeartbeatInterval = faultLease / 4
	cfg.ReaperInterval = 20 * time.Millisecond
	return cfg
}

// commits counts, per instance, the outcomes rec saw committed and fenced.
func commits(rec *recorder) (committed, fenced map[int64]int) {
	committed, fenced = map[int64]int{}, map[int64]int{}
	for _, e := range rec.stepEvents() {
		switch {
		case e.Fenced:
			fenced[e.ID]++
		case e.CommitErr == nil:
			committed[e.ID]++
		}
	}
	return committed, fenced
}

// errCut is what a pool whose engine was "killed" answers.
var errCut = errors.New("fault test: connection cut")

// cuttablePool is a pool on url that fails every acquire while cut is set,
// as the connections of a dead process would.
func cuttablePool(t *testing.T, url string, cut *atomic.Bool) *pgxpool.Pool {
	return testPool(t, url, func(pc *pgxpool.Config) {
		pc.PrepareConn = func(context.Context, *pgx.Conn) (bool, error) {
			if cut.Load() {
				return true, errCut
			}
			return true, nil
		}
	})
}

// testPool is a pool of 16 connections on url, configured by configure,
// closed when t ends.
func testPool(t *testing.T, url string, configure func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	pc.MaxConns = 16
	configure(pc)
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func TestKilledEngineStepsRunAgainOnceAfterTheLease(t *testing.T) {
	t.Parallel()
	const n = 4
	b := setup(t, nil)

	// Engine A: its steps block until unblock is closed, ignoring their
	// contexts, as a wedged process would.
	var (
		mu      sync.Mutex
		runs    = map[int64][]string{} // per instance, which engine ran it, in order
		started = make(chan int64, n)
		unblock = make(chan struct{})
	)
	ran := func(engine string, id int64) {
		mu.Lock()
		runs[id] = append(runs[id], engine)
		mu.Unlock()
	}
	defA := faultFSM(t, "A", func(_ context.Context, s *durable.Step[faultState]) {
		ran("A", s.ID)
		started <- s.ID
		<-unblock
	})
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = b.insert(t, defA.With(faultState{N: i}), nil)
	}
	var cut atomic.Bool
	recA := &recorder{}
	a := newClient(t, cuttablePool(t, b.url, &cut), faultConfig(defA, n), recA)
	ctxA, killA := context.WithCancel(context.Background())
	defer killA()
	if err := a.Start(ctxA); err != nil {
		t.Fatal(err)
	}
	for range n {
		<-started
	}

	// Kill A: its run is cancelled and its connections are gone, so its
	// heartbeats no longer extend its leases.
	killA()
	cut.Store(true)

	// Engine B, on the same database, takes the rows back once A's leases
	// have expired and finishes them.
	defB := faultFSM(t, "B", func(_ context.Context, s *durable.Step[faultState]) { ran("B", s.ID) })
	recB := &recorder{}
	startClient(t, newClient(t, b.pool, faultConfig(defB, n), recB))
	for _, id := range ids {
		in := b.waitStatus(t, id, durable.StatusDone)
		if string(in.Result) != `"B"` || in.Attempt != 2 {
			t.Errorf("instance %d: result %s at attempt %d, want \"B\" at 2", id, in.Result, in.Attempt)
		}
	}

	// A comes back to life: its steps return, and their outcomes are
	// fenced off.
	cut.Store(false)
	close(unblock)
	<-a.Stopped()

	waitFor(t, "B's step events of its commits", func() bool {
		committed, _ := commits(recB)
		for _, id := range ids {
			if committed[id] == 0 {
				return false
			}
		}
		return true
	})
	committedA, fencedA := commits(recA)
	committedB, fencedB := commits(recB)
	mu.Lock()
	defer mu.Unlock()
	for _, id := range ids {
		if got := strings.Join(runs[id], ","); got != "A,B" {
			t.Errorf("instance %d ran on %s, want A,B", id, got)
		}
		if committedA[id]+committedB[id] != 1 || committedB[id] != 1 || fencedA[id] != 1 || fencedB[id] != 0 {
			t.Errorf("instance %d: committed A %d B %d, fenced A %d B %d; want one commit, by B, and A fenced",
				id, committedA[id], committedB[id], fencedA[id], fencedB[id])
		}
	}
	b.noStuckRows(t)
}

// The worker process of TestSIGKILLedWorkerProcess: the test binary run
// again with these variables set.
const (
	workerEnv    = "DURABLE_FAULT_WORKER"     // "1" in the worker
	workerURLEnv = "DURABLE_FAULT_WORKER_URL" // the database it works on
	workerIDEnv  = "DURABLE_FAULT_WORKER_ID"  // its Config.ID
)

// TestFaultWorkerProcess is the worker process, not a test: it runs an
// engine whose steps announce themselves on stdout ("running <id>
// <attempt>") and then block until the process is killed.
func TestFaultWorkerProcess(t *testing.T) {
	if os.Getenv(workerEnv) != "1" {
		t.Skip("the worker process of TestSIGKILLedWorkerProcess")
	}
	var out sync.Mutex
	def := faultFSM(t, "worker", func(ctx context.Context, s *durable.Step[faultState]) {
		out.Lock()
		fmt.Fprintf(os.Stdout, "running %d %d\n", s.ID, s.Attempt)
		out.Unlock()
		select {} // until SIGKILL
	})
	cfg := faultConfig(def, 8)
	cfg.ID = os.Getenv(workerIDEnv)
	c := newClient(t, newPool(t, os.Getenv(workerURLEnv)), cfg, &recorder{})
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-c.Stopped()
}

func TestSIGKILLedWorkerProcess(t *testing.T) {
	t.Parallel()
	const n = 3
	b := setup(t, nil)
	var (
		mu   sync.Mutex
		runs = map[int64]int{} // by the in-process engine
	)
	def := faultFSM(t, "survivor", func(_ context.Context, s *durable.Step[faultState]) {
		mu.Lock()
		runs[s.ID]++
		mu.Unlock()
	})
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = b.insert(t, def.With(faultState{N: i}), nil)
	}

	cmd := exec.Command(os.Args[0], "-test.run=^TestFaultWorkerProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), workerEnv+"=1", workerURLEnv+"="+b.url, workerIDEnv+"=worker-process")
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})

	// Wait until the worker runs a step of every instance.
	running := map[int64]bool{}
	lines := bufio.NewScanner(stdout)
	for len(running) < n && lines.Scan() {
		f := strings.Fields(lines.Text())
		if len(f) != 3 || f[0] != "running" {
			continue
		}
		id, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil || f[2] != "1" {
			t.Fatalf("worker said %q", lines.Text())
		}
		running[id] = true
	}
	if len(running) < n {
		t.Fatalf("the worker ended after running %d steps: %v", len(running), lines.Err())
	}
	if got := b.count(t, `SELECT count(*) FROM durable_instance WHERE status = 'executing' AND lease_owner = 'worker-process'`); got != n {
		t.Fatalf("%d rows leased to the worker, want %d", got, n)
	}

	// SIGKILL: no graceful stop, no release, no commit.
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed = true
	_ = cmd.Wait()

	rec := &recorder{}
	startClient(t, newClient(t, b.pool, faultConfig(def, n), rec))
	for _, id := range ids {
		in := b.waitStatus(t, id, durable.StatusDone)
		if !running[id] || string(in.Result) != `"survivor"` || in.Attempt != 2 {
			t.Errorf("instance %d (run by the worker: %v): result %s at attempt %d, want \"survivor\" at 2",
				id, running[id], in.Result, in.Attempt)
		}
	}
	// The engine reports a step after its commit, which waitStatus may see
	// first.
	waitFor(t, "the step events of the commits", func() bool {
		committed, _ := commits(rec)
		for _, id := range ids {
			if committed[id] == 0 {
				return false
			}
		}
		return true
	})
	committed, fenced := commits(rec)
	mu.Lock()
	defer mu.Unlock()
	for _, id := range ids {
		if runs[id] != 1 || committed[id] != 1 || fenced[id] != 0 {
			t.Errorf("instance %d: ran %d times after the kill, committed %d, fenced %d; want 1, 1, 0",
				id, runs[id], committed[id], fenced[id])
		}
	}
	b.noStuckRows(t)
}
