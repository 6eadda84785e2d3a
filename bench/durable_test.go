package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem/durable"
)

// durableChunk is how many instances one turn of the durable benchmarks
// runs: 3 steps each.
const durableChunk = 200

// BenchmarkDurableSteps: steps of a 3-step FSM (Next, Next, Done) run by an
// engine with 8 workers on one queue, from Start until every instance of the
// turn is done, against the PostgreSQL server TEST_DATABASE_URL names. One
// op is one step: its claim (batched by the picker) and its committed
// outcome. The baseline is the same number of plain
// "UPDATE … SET n = n + 1 WHERE id = $1 RETURNING n" round trips by 8
// goroutines, on a table with one row per instance. Turns of 200 instances
// alternate in the order ABBA; reported are "x-baseline" (time per step
// over time per UPDATE, the median over turns), "steps/s" and the
// baseline's "updates/s".
func BenchmarkDurableSteps(b *testing.B) { benchDurableSteps(b, 8) }

// BenchmarkDurableStepsSingle: the same with one worker and one updating
// goroutine, for the latency of a step beside that of one UPDATE.
func BenchmarkDurableStepsSingle(b *testing.B) { benchDurableSteps(b, 1) }

func benchDurableSteps(b *testing.B, workers int) {
	pool := durableBenchPool(b, workers+8)
	ctx := context.Background()

	var (
		stepsLeft atomic.Int64
		allDone   = make(chan struct{}, 1)
	)
	next := func(to string) durable.StepFunc[int] {
		return func(_ context.Context, s *durable.Step[int]) (durable.Outcome, error) {
			s.State++
			return durable.Next(to), nil
		}
	}
	fsm, err := durable.NewFSM(durable.FSMConfig[int]{
		Name:    "bench",
		Initial: "a",
		Steps: map[string]durable.StepFunc[int]{
			"a": next("b"),
			"b": next("c"),
			"c": func(_ context.Context, s *durable.Step[int]) (durable.Outcome, error) {
				return durable.Done(s.State + 1), nil
			},
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	client, err := durable.NewClient(pool, &durable.Config{
		FSMs:         []durable.Definition{fsm},
		Queues:       map[string]durable.QueueConfig{durable.DefaultQueue: {Concurrency: workers, Prefetch: workers}},
		PollInterval: 10 * time.Millisecond,
		PollOnly:     true, // commits poke the picker; no NOTIFY round trips in the figures
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
		Hooks: durable.Hooks{StepStop: func(e durable.StepStopEvent) {
			if e.CommitErr != nil || e.Fenced {
				b.Errorf("step %d/%s: commit error %v, fenced %v", e.ID, e.Step, e.CommitErr, e.Fenced)
			}
			if stepsLeft.Add(-1) == 0 {
				allDone <- struct{}{}
			}
		}},
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := client.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "CREATE TABLE durable_bench_counter (id bigint PRIMARY KEY, n bigint NOT NULL)"); err != nil {
		b.Fatal(err)
	}

	// own runs n instances through the engine and returns the time from
	// Start until the last step's outcome is committed.
	own := func(n int) time.Duration {
		params := make([]durable.InsertParams, n)
		for i := range params {
			params[i] = durable.InsertParams{Args: fsm.With(0)}
		}
		if _, err := client.InsertAll(ctx, params); err != nil {
			b.Fatal(err)
		}
		stepsLeft.Store(int64(3 * n))
		start := time.Now()
		b.StartTimer()
		if err := client.Start(ctx); err != nil {
			b.Fatal(err)
		}
		<-allDone
		b.StopTimer()
		d := time.Since(start)
		if err := client.Stop(ctx); err != nil {
			b.Fatal(err)
		}
		if _, err := pool.Exec(ctx, "DELETE FROM durable_instance"); err != nil {
			b.Fatal(err)
		}
		return d
	}
	// baseline runs 3n UPDATE … RETURNING round trips, n rows three times.
	baseline := func(n int) time.Duration {
		if _, err := pool.Exec(ctx, "INSERT INTO durable_bench_counter SELECT g, 0 FROM generate_series(1, $1) g", n); err != nil {
			b.Fatal(err)
		}
		d := durableRunWorkers(b, workers, 3*n, func(i int) error {
			var v int64
			return pool.QueryRow(ctx, "UPDATE durable_bench_counter SET n = n + 1 WHERE id = $1 RETURNING n", int64(i%n+1)).Scan(&v)
		})
		if _, err := pool.Exec(ctx, "DELETE FROM durable_bench_counter"); err != nil {
			b.Fatal(err)
		}
		return d
	}

	instances := (b.N + 2) / 3
	var ownTotal, baseTotal time.Duration
	var ratios []float64
	b.ResetTimer()
	b.StopTimer()
	for lo, turn := 0, 0; lo < instances; lo, turn = lo+durableChunk, turn+1 {
		n := min(durableChunk, instances-lo)
		var o, bl time.Duration
		if turn%2 == 0 {
			o, bl = own(n), baseline(n)
		} else {
			bl, o = baseline(n), own(n)
		}
		ownTotal += o
		baseTotal += bl
		ratios = append(ratios, float64(o)/float64(bl))
	}
	slices.Sort(ratios)
	steps := float64(3 * instances)
	b.ReportMetric(ratios[len(ratios)/2], "x-baseline")
	b.ReportMetric(steps/ownTotal.Seconds(), "steps/s")
	b.ReportMetric(steps/baseTotal.Seconds(), "updates/s")
}

// durableRunWorkers runs op(0) … op(n-1) on workers goroutines and returns
// the time it took.
func durableRunWorkers(b *testing.B, workers, n int, op func(i int) error) time.Duration {
	var (
		next   atomic.Int64
		failed sync.Once
		wg     sync.WaitGroup
	)
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := op(i); err != nil {
					failed.Do(func() { b.Error(err) })
					next.Store(int64(n))
					return
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start)
}

// durableBenchPool returns a pool of up to conns connections on a fresh
// schema of the server TEST_DATABASE_URL names, dropped when b ends. It
// skips b when the variable is unset.
func durableBenchPool(b *testing.B, conns int) *pgxpool.Pool {
	b.Helper()
	url := os.Getenv("TEST_DATABASE_URL")
	if url == "" {
		b.Skip("TEST_DATABASE_URL is not set")
	}
	ctx := context.Background()
	var r [6]byte
	_, _ = rand.Read(r[:])
	schema := "durable_bench_" + hex.EncodeToString(r[:])
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_, _ = admin.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
		_ = admin.Close(ctx)
	})
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		b.Fatal(err)
	}
	pc.MaxConns = int32(conns)
	pc.ConnConfig.RuntimeParams["search_path"] = schema
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	return pool
}
