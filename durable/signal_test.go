package durable_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/idemgo/idem/durable"
)

// seen is what the steps of the signal tests record: per step run, the
// names and payloads of the awaited and pending signals.
type seen struct {
	Runs []run `json:"runs"`
}

type run struct {
	Step     string   `json:"step"`
	Attempt  int      `json:"attempt"`
	Awaited  []string `json:"awaited,omitempty"` // name=payload
	Pending  []string `json:"pending,omitempty"`
	TimedOut bool     `json:"timed_out,omitempty"`
}

// record appends this run to the state.
func record(s *durable.Step[seen]) {
	r := run{Step: s.Name, Attempt: s.Attempt, TimedOut: s.TimedOut}
	for _, sig := range s.Awaited {
		r.Awaited = append(r.Awaited, sig.Name+"="+string(sig.Payload))
	}
	for _, sig := range s.Pending {
		r.Pending = append(r.Pending, sig.Name+"="+string(sig.Payload))
	}
	s.State.Runs = append(s.State.Runs, r)
}

// runsOf decodes the recorded runs of instance id.
func (b *testBundle) runsOf(t *testing.T, id int64) []run {
	t.Helper()
	var s seen
	if err := json.Unmarshal(b.get(t, id).State, &s); err != nil {
		t.Fatal(err)
	}
	return s.Runs
}

type stepFunc = durable.StepFunc[seen]

// recording wraps a step so that it records its run first.
func recording(fn stepFunc) stepFunc {
	return func(ctx context.Context, s *durable.Step[seen]) (durable.Outcome, error) {
		record(s)
		return fn(ctx, s)
	}
}

func seenFSM(t *testing.T, steps map[string]stepFunc) *durable.FSM[seen] {
	for name, fn := range steps {
		steps[name] = recording(fn)
	}
	return mustFSM(t, durable.FSMConfig[seen]{Name: "seen", Initial: "a", Steps: steps})
}

func TestSD1_DedupKeyStoresOneSignalPerTarget(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	b := setup(t, nil)
	a := b.insert(t, ctl.With(ctlState{}), nil)
	other := b.insert(t, ctl.With(ctlState{}), nil)

	b.signal(t, durable.ByID(a), "go", 1, "evt-7")
	b.signal(t, durable.ByID(a), "go", 2, "evt-7")
	b.signal(t, durable.ByID(other), "go", 3, "evt-7")
	for range 3 {
		b.signal(t, durable.ByID(a), "x", nil, "")
	}

	var got []string
	for _, s := range b.get(t, a).Inbox {
		got = append(got, s.Name+"="+string(s.Payload)+"/"+s.DedupKey)
	}
	if diff := cmp.Diff([]string{"go=1/evt-7", "x=null/", "x=null/", "x=null/"}, got); diff != "" {
		t.Fatalf("inbox of a (-want +got):\n%s", diff)
	}
	if in := b.get(t, other); len(in.Inbox) != 1 || string(in.Inbox[0].Payload) != "3" {
		t.Fatalf("the same dedup key to another instance: inbox %v", in.Inbox)
	}
}

func TestSD2_DedupKeyOutlivesConsumption(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	b := setup(t, fast(ctl))
	b.start(t)
	id := b.insert(t, ctl.With(ctlState{}), nil)
	b.waitStatus(t, id, durable.StatusAwaitingSignal)

	b.signal(t, durable.ByID(id), "go", "p1", "d1")
	waitFor(t, "the signal to be consumed", func() bool {
		in := b.get(t, id)
		return in.Status == durable.StatusAwaitingSignal && len(in.Inbox) == 0 && string(in.State) != "{}"
	})
	b.signal(t, durable.ByID(id), "go", "p2", "d1") // redelivery: accepted, not stored
	if in := b.get(t, id); len(in.Inbox) != 0 || in.Status != durable.StatusAwaitingSignal {
		t.Fatalf("redelivered signal was stored: inbox %v, status %s", in.Inbox, in.Status)
	}
	b.signal(t, durable.ByID(id), "go", "p3", "d2")
	b.signal(t, durable.ByID(id), "finish", nil, "")
	in := b.waitStatus(t, id, durable.StatusDone)
	if diff := cmp.Diff(`{"seen": ["\"p1\"", "\"p3\""]}`, string(in.State)); diff != "" {
		t.Fatalf("state (-want +got):\n%s", diff)
	}
}

func TestSD3_OnlyAwaitedNamesWake(t *testing.T) {
	t.Parallel()
	fsm := seenFSM(t, map[string]stepFunc{
		"a": func(context.Context, *durable.Step[seen]) (durable.Outcome, error) {
			return durable.Await("b", "go", "stop"), nil
		},
		"b": func(context.Context, *durable.Step[seen]) (durable.Outcome, error) { return durable.Done(nil), nil },
	})
	b := setup(t, fast(fsm))
	b.start(t)
	id := b.insert(t, fsm.With(seen{}), nil)
	b.waitStatus(t, id, durable.StatusAwaitingSignal)

	b.signal(t, durable.ByID(id), "other", "o", "")
	if in := b.get(t, id); in.Status != durable.StatusAwaitingSignal || len(in.Inbox) != 1 {
		t.Fatalf("after a signal of another name: status %s, inbox %v", in.Status, in.Inbox)
	}
	// Had "other" woken it, b would have run and ended it, and this
	// signal would find no target.
	b.signal(t, durable.ByID(id), "go", "g", "")
	b.waitStatus(t, id, durable.StatusDone)
	want := []run{
		{Step: "a", Attempt: 1},
		{Step: "b", Attempt: 1, Awaited: []string{`go="g"`}, Pending: []string{`other="o"`, `go="g"`}},
	}
	if diff := cmp.Diff(want, b.runsOf(t, id)); diff != "" {
		t.Fatalf("runs (-want +got):\n%s", diff)
	}
}

// blocking is a step that reports its start on started and waits for
// release.
func blocking(started chan<- int64, release <-chan struct{}, out durable.Outcome) stepFunc {
	return func(ctx context.Context, s *durable.Step[seen]) (durable.Outcome, error) {
		started <- s.ID
		<-release
		return out, nil
	}
}

func TestSD4_SignalBeforeParkIsNotLost(t *testing.T) {
	t.Parallel()
	started, release := make(chan int64, 1), make(chan struct{})
	fsm := seenFSM(t, map[string]stepFunc{
		"a": blocking(started, release, durable.Await("b", "go")),
		"b": func(context.Context, *durable.Step[seen]) (durable.Outcome, error) { return durable.Done(nil), nil },
	})
	b := setup(t, fast(fsm))
	b.start(t)
	id := b.insert(t, fsm.With(seen{}), nil)
	<-started
	b.signal(t, durable.ByID(id), "go", "early", "") // a is still running
	if in := b.get(t, id); in.Status != durable.StatusExecuting {
		t.Fatalf("status %s while the step runs", in.Status)
	}
	close(release)
	b.waitStatus(t, id, durable.StatusDone)
	if diff := cmp.Diff([]string{`go="early"`}, b.runsOf(t, id)[1].Awaited); diff != "" {
		t.Fatalf("awaited (-want +got):\n%s", diff)
	}
}

func TestSD5_ProgressConsumesWhatItSaw(t *testing.T) {
	t.Parallel()
	started, release := make(chan int64, 1), make(chan struct{})
	fsm := seenFSM(t, map[string]stepFunc{
		"a": func(context.Context, *durable.Step[seen]) (durable.Outcome, error) {
			return durable.Await("b", "go"), nil
		},
		"b": blocking(started, release, durable.Await("c", "go")),
		"c": func(context.Context, *durable.Step[seen]) (durable.Outcome, error) { return durable.Done(nil), nil },
	})
	b := setup(t, fast(fsm))
	b.start(t)
	id := b.insert(t, fsm.With(seen{}), nil)
	b.waitStatus(t, id, durable.StatusAwaitingSignal)
	b.signal(t, durable.ByID(id), "go", 1, "")
	<-started
	b.signal(t, durable.ByID(id), "go", 2, "") // arrives while b runs
	close(release)
	b.waitStatus(t, id, durable.StatusDone)
	want := []run{
		{Step: "a", Attempt: 1},
		{Step: "b", Attempt: 1, Awaited: []string{"go=1"}, Pending: []string{"go=1"}},
		{Step: "c", Attempt: 1, Awaited: []string{"go=2"}, Pending: []string{"go=2"}},
	}
	if diff := cmp.Diff(want, b.runsOf(t, id)); diff != "" {
		t.Fatalf("runs (-want +got):\n%s", diff)
	}
}

func TestSD6_RetryKeepsSignalsTerminalDeletesInbox(t *testing.T) {
	t.Parallel()
	fsm := seenFSM(t, map[string]stepFunc{
		"a": func(context.Context, *durable.Step[seen]) (durable.Outcome, error) {
			return durable.Await("b", "go"), nil
		},
		"b": func(_ context.Context, s *durable.Step[seen]) (durable.Outcome, error) {
			if s.Attempt == 1 {
				return durable.Retry(0), nil
			}
			return durable.Done("ok"), nil
		},
	})
	b := setup(t, fast(fsm))
	b.start(t)
	id := b.insert(t, fsm.With(seen{}), &durable.InsertOpts{CorrelationKey: "sd6"})
	b.waitStatus(t, id, durable.StatusAwaitingSignal)
	b.signal(t, durable.ByID(id), "other", "o", "")
	b.signal(t, durable.ByKey("sd6"), "go", "g", "dk")
	b.waitStatus(t, id, durable.StatusDone)

	want := []run{
		{Step: "a", Attempt: 1},
		{Step: "b", Attempt: 1, Awaited: []string{`go="g"`}, Pending: []string{`other="o"`, `go="g"`}},
		{Step: "b", Attempt: 2, Awaited: []string{`go="g"`}, Pending: []string{`other="o"`, `go="g"`}},
	}
	if diff := cmp.Diff(want, b.runsOf(t, id)); diff != "" {
		t.Fatalf("runs (-want +got):\n%s", diff)
	}
	if n := b.count(t, "SELECT count(*) FROM durable_signal WHERE instance_id = $1", id); n != 0 {
		t.Fatalf("%d signals left in the inbox of a done instance", n)
	}
	for _, target := range []durable.Target{durable.ByID(id), durable.ByKey("sd6")} {
		if err := b.client.Signal(ctxT(t), target, "go", nil, ""); !errors.Is(err, durable.ErrNoTarget) {
			t.Fatalf("Signal(%v) to a done instance: %v, want ErrNoTarget", target, err)
		}
	}
	if n := b.count(t, "SELECT count(*) FROM durable_signal"); n != 0 {
		t.Fatalf("%d signals stored for a done instance", n)
	}
}

func TestSD7_AwaitTimeout(t *testing.T) {
	t.Parallel()
	fsm := seenFSM(t, map[string]stepFunc{
		"a": func(_ context.Context, s *durable.Step[seen]) (durable.Outcome, error) {
			timeout := 50 * time.Millisecond
			if s.CorrelationKey == "patient" {
				timeout = time.Hour
			}
			return durable.AwaitTimeout("b", timeout, "go"), nil
		},
		"b": func(context.Context, *durable.Step[seen]) (durable.Outcome, error) { return durable.Done(nil), nil },
	})
	b := setup(t, fast(fsm))
	b.start(t)

	hasty := b.insert(t, fsm.With(seen{}), &durable.InsertOpts{CorrelationKey: "hasty"})
	patient := b.insert(t, fsm.With(seen{}), &durable.InsertOpts{CorrelationKey: "patient"})
	b.waitStatus(t, hasty, durable.StatusDone)
	if diff := cmp.Diff(run{Step: "b", Attempt: 1, TimedOut: true}, b.runsOf(t, hasty)[1]); diff != "" {
		t.Fatalf("timed-out run (-want +got):\n%s", diff)
	}

	in := b.waitStatus(t, patient, durable.StatusAwaitingSignal)
	if in.AwaitDeadline.Before(time.Now().Add(50 * time.Minute)) {
		t.Fatalf("await deadline %v, want an hour from now", in.AwaitDeadline)
	}
	b.signal(t, durable.ByKey("patient"), "go", "g", "")
	b.waitStatus(t, patient, durable.StatusDone)
	if diff := cmp.Diff(run{Step: "b", Attempt: 1, Awaited: []string{`go="g"`}, Pending: []string{`go="g"`}}, b.runsOf(t, patient)[1]); diff != "" {
		t.Fatalf("signalled run (-want +got):\n%s", diff)
	}
}

func TestSignalRejectsBadArguments(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	b := setup(t, nil)
	id := b.insert(t, ctl.With(ctlState{}), nil)
	if err := b.client.Signal(ctxT(t), durable.ByID(id), "", nil, ""); err == nil {
		t.Fatal("Signal with an empty name succeeded")
	}
	if err := b.client.Signal(ctxT(t), durable.ByID(id), "go", func() {}, ""); err == nil {
		t.Fatal("Signal with a payload that does not encode succeeded")
	}
	if err := b.client.Signal(ctxT(t), durable.Target{}, "go", nil, ""); !errors.Is(err, durable.ErrNoTarget) {
		t.Fatalf("Signal to the zero Target: %v", err)
	}
	if in := b.get(t, id); len(in.Inbox) != 0 {
		t.Fatalf("inbox %v", in.Inbox)
	}
}
