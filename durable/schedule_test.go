package durable_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/idemgo/idem/durable"
)

// keyed is an FSM whose one step reports the instance's correlation key
// and the time it ran.
type ran struct {
	key string
	at  time.Time
}

func keyedFSM(t *testing.T, ch chan<- ran) *durable.FSM[struct{}] {
	return mustFSM(t, durable.FSMConfig[struct{}]{
		Name: "keyed", Initial: "a",
		Steps: map[string]durable.StepFunc[struct{}]{
			"a": func(_ context.Context, s *durable.Step[struct{}]) (durable.Outcome, error) {
				ch <- ran{s.CorrelationKey, time.Now()}
				return durable.Done(nil), nil
			},
		},
	})
}

func TestPickOrderIsPriorityThenEligibleTime(t *testing.T) {
	t.Parallel()
	runs := make(chan ran, 10)
	fsm := keyedFSM(t, runs)
	cfg := fast(fsm)
	cfg.Queues = map[string]durable.QueueConfig{durable.DefaultQueue: {Concurrency: 1, Prefetch: 5}}
	b := setup(t, cfg)

	now := time.Now()
	for _, in := range []struct {
		key      string
		priority int
		at       time.Time
	}{
		{"p2", 2, now.Add(-3 * time.Second)},
		{"p0-newer", 0, now.Add(-1 * time.Second)},
		{"p0-older", 0, now.Add(-2 * time.Second)},
		{"p1", 1, now.Add(-5 * time.Second)},
		{"future", -5, now.Add(time.Hour)},
		{"p-1", -1, now.Add(-1 * time.Second)},
	} {
		b.insert(t, fsm.With(struct{}{}), &durable.InsertOpts{CorrelationKey: in.key, Priority: in.priority, EligibleAt: in.at})
	}
	b.start(t)
	var got []string
	for range 5 {
		got = append(got, (<-runs).key)
	}
	if diff := cmp.Diff([]string{"p-1", "p0-older", "p0-newer", "p1", "p2"}, got); diff != "" {
		t.Fatalf("run order (-want +got):\n%s", diff)
	}
	if n := b.count(t, "SELECT count(*) FROM durable_instance WHERE correlation_key = 'future' AND status = 'runnable'"); n != 1 {
		t.Fatal("the instance scheduled an hour ahead is not runnable and waiting")
	}
}

func TestScheduleIn(t *testing.T) {
	t.Parallel()
	runs := make(chan ran, 1)
	fsm := keyedFSM(t, runs)
	b := setup(t, fast(fsm))
	b.start(t)
	id := b.insert(t, fsm.With(struct{}{}), &durable.InsertOpts{ScheduleIn: 300 * time.Millisecond})
	eligible := b.get(t, id).EligibleAt
	r := <-runs
	if r.at.Before(eligible) {
		t.Fatalf("ran at %v, before its eligible time %v", r.at, eligible)
	}
}

func TestSchedulingPrecedence(t *testing.T) {
	t.Parallel()
	fsm := keyedFSM(t, nil)
	b := setup(t, nil)
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	later := at.Add(time.Hour)
	for _, tc := range []struct {
		name string
		opts durable.InsertOpts
		want time.Time
	}{
		{"EligibleAt over ScheduleAt", durable.InsertOpts{EligibleAt: at, ScheduleAt: later, ScheduleIn: time.Minute}, at},
		{"ScheduleAt over ScheduleIn", durable.InsertOpts{ScheduleAt: later, ScheduleIn: time.Minute}, later},
	} {
		id := b.insert(t, fsm.With(struct{}{}), &tc.opts)
		if got := b.get(t, id).EligibleAt; !got.Equal(tc.want) {
			t.Errorf("%s: eligible at %v, want %v", tc.name, got, tc.want)
		}
	}
	id := b.insert(t, fsm.With(struct{}{}), &durable.InsertOpts{ScheduleIn: time.Hour})
	if d := time.Until(b.get(t, id).EligibleAt); d < 59*time.Minute || d > 61*time.Minute {
		t.Errorf("ScheduleIn(1h): eligible in %s", d)
	}
}
