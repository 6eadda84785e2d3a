package durable_test

import (
	"context"
	"testing"
	"time"

	"github.com/idemgo/idem/durable"
)

// With PollOnly, the engine pokes its own pickers for the rows its own
// commits make runnable: the children a Children outcome inserts, in
// another queue, and the parent their ends release, or a Client.Cancel of
// one of them in the same process. A tree of one parent and one child runs
// well within one PollInterval, not one per level.
func TestPollOnlyRunsChildrenAndReleasedParentsAtOnce(t *testing.T) {
	t.Parallel()
	child := mustFSM(t, durable.FSMConfig[struct{}]{
		Name: "child", Initial: "a", Queue: "children",
		Steps: map[string]durable.StepFunc[struct{}]{
			"a": func(_ context.Context, s *durable.Step[struct{}]) (durable.Outcome, error) {
				if s.CorrelationKey == "child:park" {
					return durable.Await("a", "never"), nil
				}
				return durable.Done(nil), nil
			},
		},
	})
	parent := mustFSM(t, durable.FSMConfig[struct{}]{
		Name: "parent", Initial: "spawn",
		Steps: map[string]durable.StepFunc[struct{}]{
			"spawn": func(_ context.Context, s *durable.Step[struct{}]) (durable.Outcome, error) {
				return durable.Children("after", durable.InsertParams{Args: child.With(struct{}{}),
					Opts: &durable.InsertOpts{CorrelationKey: "child:" + s.CorrelationKey}}), nil
			},
			"after": func(context.Context, *durable.Step[struct{}]) (durable.Outcome, error) { return durable.Done(nil), nil },
		},
	})
	cfg := fast(parent, child)
	cfg.PollOnly = true
	cfg.PollInterval = 5 * time.Second
	cfg.Queues = map[string]durable.QueueConfig{durable.DefaultQueue: {Concurrency: 2}, "children": {Concurrency: 2}}
	b := setup(t, cfg)
	b.start(t)
	time.Sleep(100 * time.Millisecond) // the pickers' first claims, at Start, are behind them
	ctx, cancel := context.WithTimeout(ctxT(t), 20*time.Second)
	defer cancel()
	for _, key := range []string{"run", "park"} {
		start := time.Now()
		id := b.insert(t, parent.With(struct{}{}), &durable.InsertOpts{CorrelationKey: key})
		if key == "park" { // the child parks for ever: cancelled, it releases its parent
			waitFor(t, "the child to park", func() bool {
				cid, err := b.client.Lookup(ctx, "child:park")
				return err == nil && b.get(t, cid).Status == durable.StatusAwaitingSignal
			})
			if err := b.client.Cancel(ctx, durable.ByKey("child:park"), "enough"); err != nil {
				t.Fatal(err)
			}
		}
		in, err := b.client.Wait(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); in.Status != durable.StatusDone || took > cfg.PollInterval/2 {
			t.Fatalf("%s: parent %s after %s; want done well within one PollInterval (%s)", key, in.Status, took, cfg.PollInterval)
		}
	}
}
