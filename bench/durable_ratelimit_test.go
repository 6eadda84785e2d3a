package bench

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/idemgo/idem/durable"
)

// Rate-limit benchmark parameters: a bucket of 200 steps/s with a burst of
// 20, held for 3 s after a warm-up of 0.5 s that drains the full bucket.
const (
	rateLimitRate   = 200
	rateLimitBurst  = 20
	rateLimitWarmup = 500 * time.Millisecond
	rateLimitHold   = 3 * time.Second
)

// BenchmarkDurableRateLimit: one queue of one-step instances that all name
// one rate-limit bucket of 200/s (burst 20), with a backlog larger than the
// bucket lets through, run by an engine with 8 workers against the
// PostgreSQL server TEST_DATABASE_URL names. One op is one hold: the steps
// that start in a window of 3 s after a warm-up of 0.5 s (by then the
// full bucket has drained and the rate is the refill's). The baseline is
// the configured rate. Reported are "steps/s" (achieved), "configured/s"
// and "achieved/configured", whose target is within 5 % of 1; the engine
// with no limit runs several times faster than 200/s here, so the bucket,
// not the engine, sets the pace.
func BenchmarkDurableRateLimit(b *testing.B) {
	pool := durableBenchPool(b, 16)
	ctx := context.Background()

	var (
		mu     sync.Mutex
		starts []time.Time
	)
	fsm, err := durable.NewFSM(durable.FSMConfig[int]{
		Name:    "bench_rl",
		Initial: "a",
		Steps: map[string]durable.StepFunc[int]{
			"a": func(context.Context, *durable.Step[int]) (durable.Outcome, error) {
				now := time.Now()
				mu.Lock()
				starts = append(starts, now)
				mu.Unlock()
				return durable.Done(nil), nil
			},
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	client, err := durable.NewClient(pool, &durable.Config{
		FSMs:         []durable.Definition{fsm},
		Queues:       map[string]durable.QueueConfig{durable.DefaultQueue: {Concurrency: 8, Prefetch: 8}},
		RateLimits:   map[string]durable.RateLimit{"api": {Limit: rateLimitRate, Burst: rateLimitBurst}},
		PollInterval: 100 * time.Millisecond,
		PollOnly:     true,
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := client.Migrate(ctx); err != nil {
		b.Fatal(err)
	}

	// The backlog outlasts a hold: the rate's worth of the warm-up and the
	// hold, and half again.
	backlog := int(rateLimitRate*(rateLimitWarmup+rateLimitHold).Seconds()*1.5) + rateLimitBurst
	var achieved []float64
	b.ResetTimer()
	b.StopTimer()
	for range b.N {
		params := make([]durable.InsertParams, backlog)
		for i := range params {
			params[i] = durable.InsertParams{Args: fsm.With(i), Opts: &durable.InsertOpts{RateLimit: "api"}}
		}
		if _, err := client.InsertAll(ctx, params); err != nil {
			b.Fatal(err)
		}
		mu.Lock()
		starts = starts[:0]
		mu.Unlock()
		b.StartTimer()
		if err := client.Start(ctx); err != nil {
			b.Fatal(err)
		}
		time.Sleep(rateLimitWarmup + rateLimitHold + 200*time.Millisecond)
		if err := client.Stop(ctx); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()

		mu.Lock()
		if len(starts) == 0 {
			b.Fatal("no step started")
		}
		from := starts[0].Add(rateLimitWarmup)
		to := from.Add(rateLimitHold)
		n := 0
		for _, t := range starts {
			if !t.Before(from) && t.Before(to) {
				n++
			}
		}
		mu.Unlock()
		achieved = append(achieved, float64(n)/rateLimitHold.Seconds())
		b.Logf("hold %d: %d steps in %s", len(achieved), n, rateLimitHold)

		if _, err := pool.Exec(ctx, "DELETE FROM durable_instance"); err != nil {
			b.Fatal(err)
		}
		if _, err := pool.Exec(ctx, "DELETE FROM durable_rate_limit_bucket"); err != nil {
			b.Fatal(err)
		}
	}
	var sum float64
	for _, a := range achieved {
		sum += a
	}
	rate := sum / float64(len(achieved))
	b.ReportMetric(rate, "steps/s")
	b.ReportMetric(rateLimitRate, "configured/s")
	b.ReportMetric(rate/rateLimitRate, "achieved/configured")
}
