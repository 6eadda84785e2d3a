package durable_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem/durable"
)

// Values PostgreSQL cannot store (text with a NUL or invalid UTF-8, JSON
// with the escape \u0000) never reach a commit: a step's outcome that
// holds one is a step error, an error text is recorded cleaned, and the
// client's calls fail with ErrUnstorable before writing anything.

func TestUnstorableOutcomesAreStepErrors(t *testing.T) {
	t.Parallel()
	type S struct {
		Name string
		N    json.RawMessage `json:",omitempty"`
	}
	var fsm *durable.FSM[S]
	fsm = mustFSM(t, durable.FSMConfig[S]{
		Name: "unstorable", Initial: "start", MaxAttempts: 2,
		Backoff: func(int) time.Duration { return 0 },
		Steps: map[string]durable.StepFunc[S]{
			"start": func(_ context.Context, s *durable.Step[S]) (durable.Outcome, error) {
				switch s.State.Name {
				case "error text":
					return durable.Outcome{}, errors.New("upstream said \xff\x00")
				case "state":
					s.State.Name = "x\x00y"
					return durable.Done(nil), nil
				case "result":
					return durable.Done("x\x00y"), nil
				case "signal name":
					return durable.Await("start", "a\x00b"), nil
				case "stop reason":
					return durable.Stop("bad \xff reason"), nil
				case "number":
					s.State.N = json.RawMessage(`1e131072`)
					return durable.Done(nil), nil
				case "child's time":
					return durable.Children("start", durable.InsertParams{Args: fsm.With(S{Name: "child"}),
						Opts: &durable.InsertOpts{EligibleAt: time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC)}}), nil
				}
				return durable.Done(nil), nil
			},
		},
	})
	b := setup(t, fast(fsm))
	b.start(t)
	for what, wantError := range map[string]string{
		"error text":   "upstream said \uFFFD\uFFFD",
		"state":        "state has the escape \\u0000",
		"result":       "result has the escape \\u0000",
		"signal name":  "Await signal name holds a NUL",
		"stop reason":  "bad \uFFFD reason",
		"number":       "state has a number with more digits before the decimal point",
		"child's time": "InsertOpts.EligibleAt is outside the range",
	} {
		id := b.insert(t, fsm.With(S{Name: what}), nil)
		in := b.waitStatus(t, id, durable.StatusFailed)
		var state S
		if err := json.Unmarshal(in.State, &state); err != nil || !strings.Contains(in.Error, wantError) || state.Name != what {
			t.Errorf("%s: failed with error %q, state %s; want an error with %q and the state unchanged", what, in.Error, in.State, wantError)
		}
	}
	for _, e := range b.events.stepEvents() {
		if e.CommitErr != nil {
			t.Errorf("a commit failed: %v", e.CommitErr)
		}
	}
}

func TestUnstorableInputIsRejected(t *testing.T) {
	t.Parallel()
	fsm := mustFSM(t, durable.FSMConfig[string]{Name: "input", Initial: "a", Steps: map[string]durable.StepFunc[string]{
		"a": func(context.Context, *durable.Step[string]) (durable.Outcome, error) {
			return durable.Await("a", "x"), nil
		},
	}})
	b := setup(t, fast(fsm))
	ctx := ctxT(t)
	id := b.insert(t, fsm.With("ok"), nil)
	for what, call := range map[string]func() error{
		"state": func() error { _, err := b.client.Insert(ctx, fsm.With("a\x00b"), nil); return err },
		"correlation key": func() error {
			_, err := b.client.Insert(ctx, fsm.With("x"), &durable.InsertOpts{CorrelationKey: "k\x00"})
			return err
		},
		"concurrency key": func() error {
			_, err := b.client.Insert(ctx, fsm.With("x"), &durable.InsertOpts{ConcurrencyKey: "k\xff"})
			return err
		},
		"signal payload": func() error { return b.client.Signal(ctx, durable.ByID(id), "x", "a\x00b", "") },
		"signal name":    func() error { return b.client.Signal(ctx, durable.ByID(id), "x\x00", nil, "") },
		"dedup key":      func() error { return b.client.Signal(ctx, durable.ByID(id), "x", nil, "d\xff") },
		"cancel reason":  func() error { return b.client.Cancel(ctx, durable.ByID(id), "r\x00") },
		"number":         func() error { return b.client.Signal(ctx, durable.ByID(id), "x", json.RawMessage(`[1e-16384]`), "") },
		"eligible time": func() error {
			_, err := b.client.Insert(ctx, fsm.With("x"), &durable.InsertOpts{EligibleAt: time.Date(-5000, 1, 1, 0, 0, 0, 0, time.UTC)})
			return err
		},
		"retry time": func() error {
			_, err := b.client.Retry(ctx, durable.ByID(id), &durable.RetryOpts{At: time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC)})
			return err
		},
	} {
		if err := call(); !errors.Is(err, durable.ErrUnstorable) {
			t.Errorf("%s: %v, want ErrUnstorable", what, err)
		}
	}
	if n := b.count(t, "SELECT count(*) FROM durable_instance"); n != 1 {
		t.Errorf("%d instances, want the first one only", n)
	}
	if in := b.get(t, id); in.Status.Terminal() {
		t.Errorf("the instance was cancelled: %+v", in)
	}
	if _, err := durable.NewFSM(durable.FSMConfig[string]{Name: "x", Initial: "a\x00", Steps: map[string]durable.StepFunc[string]{
		"a\x00": func(context.Context, *durable.Step[string]) (durable.Outcome, error) { return durable.Done(nil), nil },
	}}); !errors.Is(err, durable.ErrInvalidConfig) {
		t.Errorf("NewFSM with a NUL in a step name: %v, want ErrInvalidConfig", err)
	}
}
