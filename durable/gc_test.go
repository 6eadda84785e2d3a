package durable_test

import (
	"testing"
	"time"

	"github.com/idemgo/idem/durable"
)

func TestGCDeletesTerminalRowsPastRetentionInBatches(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	cfg := fast(ctl)
	cfg.GCRetention, cfg.GCInterval, cfg.GCBatch = time.Hour, 20*time.Millisecond, 2
	b := setup(t, cfg)
	b.start(t)

	var old []int64
	for i := range 5 {
		id := b.insert(t, ctl.With(ctlState{}), nil)
		b.waitStatus(t, id, durable.StatusAwaitingSignal)
		b.signal(t, durable.ByID(id), "go", i, "dedup") // leaves a dedup key
		end := "finish"
		if i%2 == 1 {
			end = "fail"
		}
		b.signal(t, durable.ByID(id), end, nil, "")
		waitFor(t, "the instance to end", func() bool { return b.get(t, id).Status.Terminal() })
		old = append(old, id)
	}
	recent := b.insert(t, ctl.With(ctlState{}), nil)
	b.waitStatus(t, recent, durable.StatusAwaitingSignal)
	b.signal(t, durable.ByID(recent), "finish", nil, "")
	b.waitStatus(t, recent, durable.StatusDone)
	live := b.insert(t, ctl.With(ctlState{}), nil)
	b.waitStatus(t, live, durable.StatusAwaitingSignal)
	// Live rows are never collected, however old.
	b.exec(t, "UPDATE durable_instance SET inserted_at = now() - interval '1 day', finished_at = now() - interval '1 day' WHERE id = $1", live)

	b.exec(t, "UPDATE durable_instance SET finished_at = now() - interval '2 hours' WHERE id = ANY($1)", old)
	waitFor(t, "the old rows to be collected", func() bool {
		return b.count(t, "SELECT count(*) FROM durable_instance WHERE id = ANY($1)", old) == 0
	})
	if n := b.count(t, "SELECT count(*) FROM durable_signal_dedup"); n != 0 {
		t.Fatalf("%d dedup keys of collected rows left", n)
	}
	if n := b.count(t, "SELECT count(*) FROM durable_instance WHERE id IN ($1, $2)", recent, live); n != 2 {
		t.Fatal("GC deleted a recent or a live row")
	}
	// The event comes once the sweep that deleted the rows has ended,
	// which may be after they are seen gone.
	swept := func() int {
		b.events.mu.Lock()
		defer b.events.mu.Unlock()
		total := 0
		for _, e := range b.events.swept {
			total += e.Count
		}
		return total
	}
	waitFor(t, "the sweep's events", func() bool { return swept() >= 5 })
	if total := swept(); total != 5 {
		t.Fatalf("swept events count %d rows, want 5", total)
	}
}

func TestGCDisabled(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	cfg := fast(ctl)
	cfg.GCRetention, cfg.GCInterval = -1, time.Millisecond
	b := setup(t, cfg)
	b.start(t)
	id := b.insert(t, ctl.With(ctlState{}), nil)
	b.waitStatus(t, id, durable.StatusAwaitingSignal)
	b.signal(t, durable.ByID(id), "finish", nil, "")
	b.waitStatus(t, id, durable.StatusDone)
	b.exec(t, "UPDATE durable_instance SET finished_at = now() - interval '10 years' WHERE id = $1", id)
	// The steps of a second instance take several polls; GC, were it on,
	// would have run every millisecond meanwhile.
	other := b.insert(t, ctl.With(ctlState{}), nil)
	b.waitStatus(t, other, durable.StatusAwaitingSignal)
	b.signal(t, durable.ByID(other), "finish", nil, "")
	b.waitStatus(t, other, durable.StatusDone)
	b.get(t, id)
}
