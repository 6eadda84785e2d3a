package durable_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/idemgo/idem/durable"
)

// An instance whose inbox is too large to load (here over a GiB of
// unconsumed signals, more than PostgreSQL builds in one value) fails its
// own step with an error that says so, while the other instances of its
// queue, claimed beside it, run on: its inbox is loaded apart from the
// claim.
func TestHugeInboxDoesNotStallItsQueue(t *testing.T) {
	t.Parallel()
	b, _, huge, other := twoAwaitingSignals(t)

	// 1100 signals of 1 MiB each, built by the server: they compress to
	// little on disk, but their JSON takes 1.1 GiB.
	b.exec(t, `INSERT INTO durable_signal (instance_id, name, payload)
		SELECT $1, 'noise', to_jsonb(repeat('a', 1 << 20)) FROM generate_series(1, 1100)`, huge)
	b.signal(t, durable.ByID(huge), "go", 1, "")
	b.signal(t, durable.ByID(other), "finish", 2, "")

	start := time.Now()
	b.waitStatus(t, other, durable.StatusDone)
	t.Logf("the other instance was done after %v", time.Since(start))
	waitFor(t, "the huge inbox's step to fail", func() bool { // Get would load the inbox
		return b.count(t, `SELECT count(*) FROM durable_instance WHERE id = $1 AND error LIKE '%inbox%'`, huge) == 1
	})
}

// twoAwaitingSignals starts an engine running two instances of ctlFSM
// that await signals in one queue: huge, whose inbox a test makes too
// large, and other, which must run on beside it.
func twoAwaitingSignals(t *testing.T) (b *testBundle, ctl *durable.FSM[ctlState], huge, other int64) {
	t.Helper()
	ctl = ctlFSM(t)
	b = setup(t, fast(ctl))
	huge = b.insert(t, ctl.With(ctlState{}), nil)
	other = b.insert(t, ctl.With(ctlState{}), nil)
	b.start(t)
	b.waitStatus(t, huge, durable.StatusAwaitingSignal)
	b.waitStatus(t, other, durable.StatusAwaitingSignal)
	return b, ctl, huge, other
}

// An inbox with more signals than a claim loads with its row is loaded
// apart, whole, before the step runs.
func TestLargeInboxIsLoadedApart(t *testing.T) {
	t.Parallel()
	type seen struct{ Pending, Awaited int }
	fsm := mustFSM(t, durable.FSMConfig[seen]{
		Name: "counter", Initial: "start",
		Steps: map[string]durable.StepFunc[seen]{
			"start": func(ctx context.Context, s *durable.Step[seen]) (durable.Outcome, error) {
				return durable.Await("got", "go"), nil
			},
			"got": func(ctx context.Context, s *durable.Step[seen]) (durable.Outcome, error) {
				return durable.Done(seen{len(s.Pending), len(s.Awaited)}), nil
			},
		},
	})
	b := setup(t, fast(fsm))
	b.start(t)
	id := b.insert(t, fsm.With(seen{}), nil)
	b.waitStatus(t, id, durable.StatusAwaitingSignal)
	b.exec(t, `INSERT INTO durable_signal (instance_id, name, payload)
		SELECT $1, CASE WHEN n % 2 = 0 THEN 'go' ELSE 'noise' END, to_jsonb(n) FROM generate_series(1, 2001) n`, id)
	b.signal(t, durable.ByID(id), "go", 0, "")
	in := b.waitStatus(t, id, durable.StatusDone)
	var got seen
	if err := json.Unmarshal(in.Result, &got); err != nil || got != (seen{2002, 1001}) {
		t.Fatalf("the step saw %+v (%v), want 2002 pending and 1001 awaited", got, err)
	}
}
