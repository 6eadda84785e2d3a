package bench

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"runtime/pprof"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/idemgo/idem/durable"
)

// The durable-versus-River benchmarks burn down N units of work inserted
// before the engine starts, on one PostgreSQL server, each side in a
// schema of its own (the pool's search_path), with the same worker
// concurrency, in alternating rounds (River first in even rounds, durable
// first in odd ones) so that both see the same machine load. A unit counts
// once its last commit is done: durable's StepStop hook fires after the
// outcome's commit, River's completion events after the completer's.
//
// Environment (all optional):
//
//	DURABLE_RIVER_N           units per round (default 10000; the issue asks for 100000)
//	DURABLE_RIVER_WORKERS     worker concurrency of both sides (default 8)
//	DURABLE_RIVER_ROUNDS      rounds, each running both sides once (default 2)
//	DURABLE_RIVER_CPUPROFILE  file for a CPU profile of durable's last round only
const (
	riverBenchBatch = 1000 // rows per InsertAll / InsertMany
)

// riverBenchParams reads the environment described above.
func riverBenchParams(b *testing.B) (n, workers, rounds int) {
	get := func(name string, def int) int {
		s := os.Getenv(name)
		if s == "" {
			return def
		}
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			b.Fatalf("%s=%q: want a positive integer", name, s)
		}
		return v
	}
	return get("DURABLE_RIVER_N", 10000), get("DURABLE_RIVER_WORKERS", 8), get("DURABLE_RIVER_ROUNDS", 2)
}

// BenchmarkDurableVsRiver: N single-step no-op durable instances (one step
// returning Done) against N no-op River jobs. Reported: "N", durable's
// "instances/s", River's "jobs/s" (each over all rounds) and "x-river",
// instances/s over jobs/s (above 1: durable is faster). The target of
// issue #6 is x-river ≥ 1.2.
func BenchmarkDurableVsRiver(b *testing.B) {
	n, workers, rounds := riverBenchParams(b)
	ctx := context.Background()

	// Durable: one FSM of one step.
	dpool := durableBenchPool(b, workers+8)
	var done atomic.Int64
	var doneCh = make(chan struct{}, 1)
	var want atomic.Int64
	fsm, err := durable.NewFSM(durable.FSMConfig[int]{
		Name:    "noop",
		Initial: "run",
		Steps: map[string]durable.StepFunc[int]{
			"run": func(context.Context, *durable.Step[int]) (durable.Outcome, error) {
				return durable.Done(nil), nil
			},
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	dclient := riverBenchDurableClient(b, dpool, fsm, workers, func(e durable.StepStopEvent) {
		if e.Kind == durable.KindDone && done.Add(1) == want.Load() {
			doneCh <- struct{}{}
		}
	})
	ownTurn := func(profile string) time.Duration {
		params := make([]durable.InsertParams, n)
		for i := range params {
			params[i] = durable.InsertParams{Args: fsm.With(0)}
		}
		riverBenchInsertDurable(b, dclient, params)
		done.Store(0)
		want.Store(int64(n))
		stopProfile := riverBenchProfile(b, profile)
		start := time.Now()
		if err := dclient.Start(ctx); err != nil {
			b.Fatal(err)
		}
		<-doneCh
		d := time.Since(start)
		stopProfile()
		if err := dclient.Stop(ctx); err != nil {
			b.Fatal(err)
		}
		riverBenchTruncate(b, dpool, "durable_instance, durable_signal, durable_signal_dedup")
		return d
	}

	// River: one no-op worker.
	rpool := riverBenchPool(b, workers+8)
	rworkers := river.NewWorkers()
	river.AddWorker(rworkers, river.WorkFunc(func(context.Context, *river.Job[riverNoopArgs]) error { return nil }))
	riverTurn := func() time.Duration {
		params := make([]river.InsertManyParams, n)
		for i := range params {
			params[i] = river.InsertManyParams{Args: riverNoopArgs{}}
		}
		return riverBenchDrain(b, rpool, rworkers, workers, params, n, func(*river.Event) bool { return true })
	}

	riverBenchRounds(b, "single step", n, rounds, ownTurn, riverTurn, "instances/s", "jobs/s", "x-river")
}

// BenchmarkDurableVsRiverChain: N durable instances of three steps ("a"
// awaits the signal "go", "b" goes on to "c", "c" is done), each signalled
// once by correlation key while the engine runs (workers goroutines send
// the N signals, from the engine's start), against N chains of three River
// jobs in which each of the first two jobs inserts the next one and
// completes itself in one transaction (JobCompleteTx), River's equivalent
// of a committed step transition. River has no signals: its side does no
// work for them, so the comparison favours River by N Signal calls.
// Reported: "N", durable's "instances/s", River's "chains/s" and
// "x-river", instances/s over chains/s.
func BenchmarkDurableVsRiverChain(b *testing.B) {
	n, workers, rounds := riverBenchParams(b)
	ctx := context.Background()

	dpool := durableBenchPool(b, 2*workers+8)
	var done atomic.Int64
	var doneCh = make(chan struct{}, 1)
	var want atomic.Int64
	fsm, err := durable.NewFSM(durable.FSMConfig[int]{
		Name:    "chain",
		Initial: "a",
		Steps: map[string]durable.StepFunc[int]{
			"a": func(context.Context, *durable.Step[int]) (durable.Outcome, error) {
				return durable.Await("b", "go"), nil
			},
			"b": func(_ context.Context, s *durable.Step[int]) (durable.Outcome, error) {
				s.State++
				return durable.Next("c"), nil
			},
			"c": func(_ context.Context, s *durable.Step[int]) (durable.Outcome, error) {
				return durable.Done(s.State), nil
			},
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	dclient := riverBenchDurableClient(b, dpool, fsm, workers, func(e durable.StepStopEvent) {
		if e.Kind == durable.KindDone && done.Add(1) == want.Load() {
			doneCh <- struct{}{}
		}
	})
	ownTurn := func(profile string) time.Duration {
		params := make([]durable.InsertParams, n)
		for i := range params {
			params[i] = durable.InsertParams{Args: fsm.With(0), Opts: &durable.InsertOpts{CorrelationKey: "k" + strconv.Itoa(i)}}
		}
		riverBenchInsertDurable(b, dclient, params)
		done.Store(0)
		want.Store(int64(n))
		stopProfile := riverBenchProfile(b, profile)
		start := time.Now()
		if err := dclient.Start(ctx); err != nil {
			b.Fatal(err)
		}
		durableRunWorkers(b, workers, n, func(i int) error {
			return dclient.Signal(ctx, durable.ByKey("k"+strconv.Itoa(i)), "go", nil, "")
		})
		<-doneCh
		d := time.Since(start)
		stopProfile()
		if err := dclient.Stop(ctx); err != nil {
			b.Fatal(err)
		}
		riverBenchTruncate(b, dpool, "durable_instance, durable_signal, durable_signal_dedup")
		return d
	}

	rpool := riverBenchPool(b, workers+8)
	rworkers := river.NewWorkers()
	river.AddWorker(rworkers, river.WorkFunc(func(ctx context.Context, job *river.Job[riverChainArgs]) error {
		if job.Args.Stage >= 3 {
			return nil
		}
		tx, err := rpool.Begin(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback(ctx) }()
		client := river.ClientFromContext[pgx.Tx](ctx)
		if _, err := client.InsertTx(ctx, tx, riverChainArgs{Stage: job.Args.Stage + 1, N: job.Args.N + 1}, nil); err != nil {
			return err
		}
		if _, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}))
	riverTurn := func() time.Duration {
		params := make([]river.InsertManyParams, n)
		for i := range params {
			params[i] = river.InsertManyParams{Args: riverChainArgs{Stage: 1}}
		}
		return riverBenchDrain(b, rpool, rworkers, workers, params, n, func(e *river.Event) bool {
			var a riverChainArgs
			return json.Unmarshal(e.Job.EncodedArgs, &a) == nil && a.Stage == 3
		})
	}

	riverBenchRounds(b, "3 steps + signal vs 3 chained jobs", n, rounds, ownTurn, riverTurn, "instances/s", "chains/s", "x-river")
}

// riverBenchRounds runs rounds of one durable turn and one River turn, in
// alternating order, logs each round and reports the rates over all rounds.
func riverBenchRounds(b *testing.B, name string, n, rounds int, own func(profile string) time.Duration, peer func() time.Duration, ownUnit, peerUnit, ratioUnit string) {
	profile := os.Getenv("DURABLE_RIVER_CPUPROFILE")
	var ownTotal, peerTotal time.Duration
	b.ResetTimer()
	b.StopTimer()
	for r := range rounds {
		p := ""
		if r == rounds-1 {
			p = profile
		}
		var o, pe time.Duration
		if r%2 == 0 {
			pe, o = peer(), own(p)
		} else {
			o, pe = own(p), peer()
		}
		ownTotal += o
		peerTotal += pe
		b.Logf("%s, round %d, N=%d: durable %v (%.0f %s), River %v (%.0f %s), ratio %.2f",
			name, r, n, o.Round(time.Millisecond), float64(n)/o.Seconds(), ownUnit,
			pe.Round(time.Millisecond), float64(n)/pe.Seconds(), peerUnit, pe.Seconds()/o.Seconds())
	}
	units := float64(n * rounds)
	b.ReportMetric(float64(n), "N")
	b.ReportMetric(units/ownTotal.Seconds(), ownUnit)
	b.ReportMetric(units/peerTotal.Seconds(), peerUnit)
	b.ReportMetric(peerTotal.Seconds()/ownTotal.Seconds(), ratioUnit)
}

// riverBenchDurableClient returns a migrated durable client of fsm on pool
// with workers workers (and as many rows of prefetch) on the default queue,
// polling every 10ms, without NOTIFY, calling stepStop after each step.
func riverBenchDurableClient(b *testing.B, pool *pgxpool.Pool, fsm durable.Definition, workers int, stepStop func(durable.StepStopEvent)) *durable.Client {
	client, err := durable.NewClient(pool, &durable.Config{
		FSMs:         []durable.Definition{fsm},
		Queues:       map[string]durable.QueueConfig{durable.DefaultQueue: {Concurrency: workers, Prefetch: workers}},
		PollInterval: 10 * time.Millisecond,
		PollOnly:     true, // commits poke the picker; inserts are done before Start
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
		Hooks: durable.Hooks{StepStop: func(e durable.StepStopEvent) {
			if e.CommitErr != nil || e.Fenced || e.Err != nil {
				b.Errorf("step %d/%s: error %v, commit error %v, fenced %v", e.ID, e.Step, e.Err, e.CommitErr, e.Fenced)
			}
			stepStop(e)
		}},
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := client.Migrate(context.Background()); err != nil {
		b.Fatal(err)
	}
	return client
}

// riverBenchInsertDurable inserts params in batches of riverBenchBatch.
func riverBenchInsertDurable(b *testing.B, c *durable.Client, params []durable.InsertParams) {
	for lo := 0; lo < len(params); lo += riverBenchBatch {
		res, err := c.InsertAll(context.Background(), params[lo:min(lo+riverBenchBatch, len(params))])
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range res {
			if r.Duplicate {
				b.Fatal("unexpected duplicate")
			}
		}
	}
}

// riverBenchPool returns a pool on a fresh schema (durableBenchPool) with
// River's tables migrated into it.
func riverBenchPool(b *testing.B, conns int) *pgxpool.Pool {
	pool := durableBenchPool(b, conns)
	m, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := m.Migrate(context.Background(), rivermigrate.DirectionUp, nil); err != nil {
		b.Fatal(err)
	}
	return pool
}

// riverBenchDrain inserts params with InsertMany in batches of
// riverBenchBatch, then starts a River client with workers workers on the
// default queue and returns the time from its start until want completion
// events for which count reports true have arrived. The client is stopped
// and river_job emptied before it returns.
func riverBenchDrain(b *testing.B, pool *pgxpool.Pool, workers *river.Workers, maxWorkers int, params []river.InsertManyParams, want int, count func(*river.Event) bool) time.Duration {
	ctx := context.Background()
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: maxWorkers}},
		Workers:           workers,
		FetchCooldown:     time.Millisecond,      // River's minimum: fetch again as soon as workers free up
		FetchPollInterval: 10 * time.Millisecond, // durable's PollInterval in these benchmarks
		Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		b.Fatal(err)
	}
	for lo := 0; lo < len(params); lo += riverBenchBatch {
		if _, err := client.InsertMany(ctx, params[lo:min(lo+riverBenchBatch, len(params))]); err != nil {
			b.Fatal(err)
		}
	}
	events, cancel := client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: 3*len(params) + 1000, // never full: a dropped event would hang the turn
		Kinds:    []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed},
	})
	defer cancel()
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		b.Fatal(err)
	}
	for got := 0; got < want; {
		e := <-events
		if e.Kind != river.EventKindJobCompleted {
			b.Fatalf("River job %d failed: %v", e.Job.ID, e.Job.Errors)
		}
		if count(e) {
			got++
		}
	}
	d := time.Since(start)
	if err := client.Stop(ctx); err != nil {
		b.Fatal(err)
	}
	riverBenchTruncate(b, pool, "river_job")
	return d
}

// riverBenchTruncate empties tables of pool's schema.
func riverBenchTruncate(b *testing.B, pool *pgxpool.Pool, tables string) {
	if _, err := pool.Exec(context.Background(), "TRUNCATE "+tables); err != nil {
		b.Fatal(err)
	}
}

// riverBenchProfile starts a CPU profile into file, unless file is empty,
// and returns the function that ends it.
func riverBenchProfile(b *testing.B, file string) func() {
	if file == "" {
		return func() {}
	}
	f, err := os.Create(file)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Error(err)
		}
	}
}

// riverNoopArgs is the River job that does nothing.
type riverNoopArgs struct{}

func (riverNoopArgs) Kind() string { return "bench_noop" }

// riverChainArgs is stage Stage (1 to 3) of a River chain.
type riverChainArgs struct {
	Stage int `json:"stage"`
	N     int `json:"n"`
}

func (riverChainArgs) Kind() string { return "bench_chain" }
