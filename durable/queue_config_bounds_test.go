package durable_test

import (
	"context"
	"math"
	"testing"

	"github.com/idemgo/idem/durable"
)

// A queue claims up to Concurrency + Prefetch rows at once, a count its
// claim statements take as a 32-bit integer: a larger sum (or one that
// overflows int) is rejected by NewClient with a *ConfigError, rather than
// stalling the queue (with a Prefetch of math.MaxInt32, every claim of a
// queue holding a rate-limited row failed, and with math.MaxInt no claim
// was ever made). The largest sum allowed runs the queue.
func TestQueueConfigBoundsTheRowsAClaimTakes(t *testing.T) {
	t.Parallel()
	pool := newPool(t, "postgres://127.0.0.1:1/none") // never connected
	var beyondInt32 int64 = math.MaxInt32 + 1
	for name, qc := range map[string]durable.QueueConfig{
		"prefetch past int32":  {Concurrency: 2, Prefetch: math.MaxInt32},
		"prefetch overflows":   {Concurrency: 2, Prefetch: math.MaxInt},
		"concurrency too high": {Concurrency: int(beyondInt32)},
	} {
		c, err := durable.NewClient(pool, &durable.Config{Queues: map[string]durable.QueueConfig{"q": qc}})
		field := `Config.Queues["q"].Prefetch`
		if qc.Prefetch == 0 {
			field = `Config.Queues["q"].Concurrency`
		}
		checkConfigError(t, name, c, err, field)
	}

	f := mustFSM(t, durable.FSMConfig[struct{}]{
		Name: "bounds", Initial: "a",
		Steps: map[string]durable.StepFunc[struct{}]{
			"a": func(context.Context, *durable.Step[struct{}]) (durable.Outcome, error) { return durable.Done(nil), nil },
		},
	})
	cfg := fast(f)
	cfg.Queues = map[string]durable.QueueConfig{durable.DefaultQueue: {Concurrency: 2, Prefetch: math.MaxInt32 - 2}}
	cfg.RateLimits = map[string]durable.RateLimit{"api": {Limit: 100}}
	b := setup(t, cfg)
	b.start(t)
	rated := b.insert(t, f.With(struct{}{}), &durable.InsertOpts{RateLimit: "api"})
	free := b.insert(t, f.With(struct{}{}), nil)
	b.waitStatus(t, rated, durable.StatusDone)
	b.waitStatus(t, free, durable.StatusDone)
}
