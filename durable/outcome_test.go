package durable_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/idemgo/idem/durable"
)

// counter is the state of the outcome tests.
type counter struct {
	N     int      `json:"n"`
	Trail []string `json:"trail,omitempty"`
}

func TestOutcomes(t *testing.T) {
	t.Parallel()
	steps := map[string]durable.StepFunc[counter]{
		// a retries once, then moves on: the attempt resets.
		"a": func(_ context.Context, s *durable.Step[counter]) (durable.Outcome, error) {
			s.State.N++
			s.State.Trail = append(s.State.Trail, fmt.Sprintf("a@%d", s.Attempt))
			if s.Attempt == 1 {
				return durable.Retry(0), nil
			}
			return durable.Next("b"), nil
		},
		"b": func(_ context.Context, s *durable.Step[counter]) (durable.Outcome, error) {
			s.State.N *= 10
			s.State.Trail = append(s.State.Trail, fmt.Sprintf("b@%d", s.Attempt))
			if s.CorrelationKey == "stop" {
				return durable.Stop("stopped at b"), nil
			}
			return durable.Done(map[string]int{"n": s.State.N}), nil
		},
		"later": func(context.Context, *durable.Step[counter]) (durable.Outcome, error) {
			return durable.Retry(time.Hour), nil
		},
	}
	fsm := mustFSM(t, durable.FSMConfig[counter]{Name: "outcomes", Initial: "a", Steps: steps})
	b := setup(t, fast(fsm))
	b.start(t)

	done := b.insert(t, fsm.With(counter{N: 1}), nil)
	in := b.waitStatus(t, done, durable.StatusDone)
	if diff := cmp.Diff(`{"n": 30, "trail": ["a@1", "a@2", "b@1"]}`, string(in.State)); diff != "" {
		t.Fatalf("state (-want +got):\n%s", diff)
	}
	if string(in.Result) != `{"n": 30}` || in.Attempt != 1 || in.Step != "b" || in.FinishedAt.IsZero() || in.Error != "" {
		t.Fatalf("done instance %+v", in)
	}

	stopped := b.insert(t, fsm.With(counter{}), &durable.InsertOpts{CorrelationKey: "stop"})
	in = b.waitStatus(t, stopped, durable.StatusFailed)
	if in.Error != "stopped at b" || in.Result != nil || in.FinishedAt.IsZero() {
		t.Fatalf("stopped instance %+v", in)
	}

	later := b.insert(t, fsm.With(counter{}), &durable.InsertOpts{Step: "later"})
	waitFor(t, "the retry to be committed", func() bool { return b.get(t, later).Attempt == 2 })
	in = b.get(t, later)
	if in.Status != durable.StatusRunnable || time.Until(in.EligibleAt) < 59*time.Minute {
		t.Fatalf("after Retry(1h): status %s, eligible in %s", in.Status, time.Until(in.EligibleAt))
	}
}

func TestInvalidOutcomesAreStepErrors(t *testing.T) {
	t.Parallel()
	errs := make(chan error, 3)
	bad := map[string]durable.Outcome{
		"unknown-step": durable.Next("nowhere"),
		"zero":         {},
		"no-names":     durable.Await("ok"),
	}
	steps := map[string]durable.StepFunc[string]{
		"ok": func(context.Context, *durable.Step[string]) (durable.Outcome, error) { return durable.Done(nil), nil },
	}
	for name, out := range bad {
		steps[name] = func(context.Context, *durable.Step[string]) (durable.Outcome, error) { return out, nil }
	}
	fsm := mustFSM(t, durable.FSMConfig[string]{
		Name: "invalid", Initial: "ok", Steps: steps,
		OnError: func(_ context.Context, s *durable.Step[string], err error) durable.Outcome {
			errs <- err
			return durable.Stop(s.Name + ": " + err.Error())
		},
	})
	b := setup(t, fast(fsm))
	b.start(t)
	for name := range bad {
		id := b.insert(t, fsm.With(""), &durable.InsertOpts{Step: name})
		in := b.waitStatus(t, id, durable.StatusFailed)
		if !strings.HasPrefix(in.Error, name+": ") {
			t.Fatalf("%s: reason %q", name, in.Error)
		}
		if err := <-errs; name == "unknown-step" && !errors.Is(err, durable.ErrUnknownStep) {
			t.Fatalf("%s: handler got %v, want ErrUnknownStep", name, err)
		}
	}
}

func TestInsertRejectsBadOptions(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	b := setup(t, nil)
	for name, tc := range map[string]struct {
		args durable.Args
		opts *durable.InsertOpts
	}{
		"zero args":    {args: durable.Args{}},
		"nil FSM":      {args: (*durable.FSM[int])(nil).With(1)},
		"unknown step": {args: ctl.With(ctlState{}), opts: &durable.InsertOpts{Step: "nope"}},
		"priority":     {args: ctl.With(ctlState{}), opts: &durable.InsertOpts{Priority: 40000}},
		"queue":        {args: ctl.With(ctlState{}), opts: &durable.InsertOpts{Queue: strings.Repeat("q", 200)}},
	} {
		if _, err := b.client.Insert(ctxT(t), tc.args, tc.opts); err == nil {
			t.Errorf("%s: Insert succeeded", name)
		}
	}
	// The nil *FSM that NewFSM returns with its error, kept by a caller
	// who ignored the error, is refused by every insert.
	var nilFSM *durable.FSM[int]
	if _, err := b.client.InsertAll(ctxT(t), []durable.InsertParams{{Args: nilFSM.With(1)}}); err == nil {
		t.Error("InsertAll of a nil FSM succeeded")
	}
	if _, _, err := b.client.InsertOrSignal(ctxT(t), nilFSM.With(1), &durable.InsertOpts{CorrelationKey: "k"}, "s", nil, ""); err == nil {
		t.Error("InsertOrSignal of a nil FSM succeeded")
	}
	unencodable := mustFSM(t, durable.FSMConfig[any]{Name: "any", Initial: "a", Steps: map[string]durable.StepFunc[any]{
		"a": func(context.Context, *durable.Step[any]) (durable.Outcome, error) { return durable.Done(nil), nil },
	}})
	if _, err := b.client.Insert(ctxT(t), unencodable.With(make(chan int)), nil); err == nil {
		t.Error("Insert of a state that does not encode succeeded")
	}
	if n := b.count(t, "SELECT count(*) FROM durable_instance"); n != 0 {
		t.Fatalf("%d rows inserted", n)
	}
}

func TestNewFSMValidates(t *testing.T) {
	t.Parallel()
	step := func(context.Context, *durable.Step[int]) (durable.Outcome, error) { return durable.Done(nil), nil }
	for name, cfg := range map[string]durable.FSMConfig[int]{
		"no name":         {Initial: "a", Steps: map[string]durable.StepFunc[int]{"a": step}},
		"no steps":        {Name: "x", Initial: "a"},
		"initial missing": {Name: "x", Initial: "b", Steps: map[string]durable.StepFunc[int]{"a": step}},
		"nil step":        {Name: "x", Initial: "a", Steps: map[string]durable.StepFunc[int]{"a": step, "b": nil}},
		"negative":        {Name: "x", Initial: "a", Steps: map[string]durable.StepFunc[int]{"a": step}, MaxAttempts: -1},
	} {
		if _, err := durable.NewFSM(cfg); err == nil {
			t.Errorf("%s: NewFSM succeeded", name)
		}
	}
	f, err := durable.NewFSM(durable.FSMConfig[int]{Name: "x", Initial: "a", Steps: map[string]durable.StepFunc[int]{"a": step}})
	if err != nil || f.Name() != "x" || f.Version() != 1 {
		t.Fatalf("NewFSM: %v, %v", f, err)
	}
}

// The outcome kinds, reported in StepStopEvent.Kind, carry the names of the
// telemetry events' kind in the design (seed 001): next, retry, await,
// schedule_childs, done, stop; cancel is this engine's addition.
func TestOutcomeKindsCarryTheTelemetryNames(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		out  durable.Outcome
		want string
	}{
		{durable.Next("s"), "next"},
		{durable.Retry(0), "retry"},
		{durable.Await("s", "go"), "await"},
		{durable.Children("s"), "schedule_childs"},
		{durable.Done(nil), "done"},
		{durable.Stop("why"), "stop"},
		{durable.Cancel("why"), "cancel"},
	} {
		if got := string(tc.out.Kind()); got != tc.want {
			t.Errorf("%s: kind %q, want %q", tc.out, got, tc.want)
		}
	}
}
