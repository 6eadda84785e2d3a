package bench

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgo/idem/durable"
)

// durableFanOut is how many children the fan-out benchmark's parent
// spawns, and how many plain instances its baseline burns down.
const durableFanOut = 1000

// BenchmarkDurableChildren: one parent whose step returns Children with
// 1,000 one-step children (Done at once), run by an engine with 8 workers
// on one queue, from the parent's insert until its next step runs, against
// the PostgreSQL server TEST_DATABASE_URL names. One op is one fan-out.
// The baseline, in the same engine and the same run, is the burn-down of
// 1,000 plain one-step instances inserted with InsertAll. The turns
// alternate in the order ABBA; reported are "children/s", the baseline's
// "plain/s" and "x-plain" (the fan-out's time over the burn-down's);
// ns/op is the time of one fan-out.
func BenchmarkDurableChildren(b *testing.B) {
	const workers = 8
	pool := durableBenchPool(b, workers+8)
	ctx := context.Background()

	var (
		plainLeft atomic.Int64
		plainDone = make(chan struct{}, 1)
		woke      = make(chan struct{}, 1)
	)
	done := func(_ context.Context, _ *durable.Step[int]) (durable.Outcome, error) {
		return durable.Done(nil), nil
	}
	leaf, err := durable.NewFSM(durable.FSMConfig[int]{
		Name: "leaf", Initial: "run",
		Steps: map[string]durable.StepFunc[int]{"run": done},
	})
	if err != nil {
		b.Fatal(err)
	}
	plain, err := durable.NewFSM(durable.FSMConfig[int]{
		Name: "plain", Initial: "run",
		Steps: map[string]durable.StepFunc[int]{"run": done},
	})
	if err != nil {
		b.Fatal(err)
	}
	children := make([]durable.InsertParams, durableFanOut)
	for i := range children {
		children[i] = durable.InsertParams{Args: leaf.With(i)}
	}
	parent, err := durable.NewFSM(durable.FSMConfig[int]{
		Name: "parent", Initial: "spawn",
		Steps: map[string]durable.StepFunc[int]{
			"spawn": func(context.Context, *durable.Step[int]) (durable.Outcome, error) {
				return durable.Children("after", children...), nil
			},
			"after": done,
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	client, err := durable.NewClient(pool, &durable.Config{
		FSMs:         []durable.Definition{leaf, plain, parent},
		Queues:       map[string]durable.QueueConfig{durable.DefaultQueue: {Concurrency: workers, Prefetch: workers}},
		PollInterval: 10 * time.Millisecond,
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
		Hooks: durable.Hooks{StepStop: func(e durable.StepStopEvent) {
			if e.CommitErr != nil || e.Fenced {
				b.Errorf("step %d/%s: commit error %v, fenced %v", e.ID, e.Step, e.CommitErr, e.Fenced)
			}
			switch {
			case e.FSM == "parent" && e.Step == "after":
				woke <- struct{}{}
			case e.FSM == "plain" && plainLeft.Add(-1) == 0:
				plainDone <- struct{}{}
			}
		}},
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := client.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = client.Stop(ctx) })
	clean := func() {
		if _, err := pool.Exec(ctx, "DELETE FROM durable_instance"); err != nil {
			b.Fatal(err)
		}
	}

	fanOut := func() time.Duration {
		start := time.Now()
		b.StartTimer()
		if _, err := client.Insert(ctx, parent.With(0), nil); err != nil {
			b.Fatal(err)
		}
		<-woke
		b.StopTimer()
		d := time.Since(start)
		clean()
		return d
	}
	burnDown := func() time.Duration {
		params := make([]durable.InsertParams, durableFanOut)
		for i := range params {
			params[i] = durable.InsertParams{Args: plain.With(i)}
		}
		plainLeft.Store(durableFanOut)
		start := time.Now()
		if _, err := client.InsertAll(ctx, params); err != nil {
			b.Fatal(err)
		}
		<-plainDone
		d := time.Since(start)
		clean()
		return d
	}

	var fanTotal, plainTotal time.Duration
	b.ResetTimer()
	b.StopTimer()
	for i := range b.N {
		var f, p time.Duration
		if i%2 == 0 {
			f, p = fanOut(), burnDown()
		} else {
			p, f = burnDown(), fanOut()
		}
		fanTotal += f
		plainTotal += p
	}
	b.ReportMetric(float64(b.N*durableFanOut)/fanTotal.Seconds(), "children/s")
	b.ReportMetric(float64(b.N*durableFanOut)/plainTotal.Seconds(), "plain/s")
	b.ReportMetric(fanTotal.Seconds()/plainTotal.Seconds(), "x-plain")
}
