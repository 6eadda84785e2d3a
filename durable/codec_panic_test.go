package durable_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem/durable"
	"github.com/idemgo/idem/internal/syncbuf"
)

// touchy is a state whose JSON methods panic when Boom names them: "encode"
// (MarshalJSON) or "decode" (UnmarshalJSON).
type touchy struct {
	Boom string `json:"boom,omitempty"`
}

func (s touchy) MarshalJSON() ([]byte, error) {
	if s.Boom == "encode" {
		panic("touchy: encode")
	}
	type plain touchy
	return json.Marshal(plain(s))
}

func (s *touchy) UnmarshalJSON(b []byte) error {
	type plain touchy
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	if p.Boom == "decode" {
		panic("touchy: decode")
	}
	*s = touchy(p)
	return nil
}

// TestPanicsOfTheStatesJSONMethodsAreStepFailures checks that a panic in
// the JSON methods of a step's values (its state, its Done result, the
// state of a child) or in the FSM's Backoff fails the step, as a panic of
// the step does, instead of taking down the engine's process (and, the row
// being reaped and run again, every engine's in turn).
func TestPanicsOfTheStatesJSONMethodsAreStepFailures(t *testing.T) {
	t.Parallel()
	var fsm *durable.FSM[touchy]
	fsm = mustFSM(t, durable.FSMConfig[touchy]{
		Name: "touchy", Initial: "ok", MaxAttempts: 1,
		Steps: map[string]durable.StepFunc[touchy]{
			"ok": func(context.Context, *durable.Step[touchy]) (durable.Outcome, error) {
				return durable.Done(nil), nil
			},
			"state": func(_ context.Context, s *durable.Step[touchy]) (durable.Outcome, error) {
				s.State.Boom = "encode"
				return durable.Next("ok"), nil
			},
			"result": func(context.Context, *durable.Step[touchy]) (durable.Outcome, error) {
				return durable.Done(touchy{Boom: "encode"}), nil
			},
			"child": func(context.Context, *durable.Step[touchy]) (durable.Outcome, error) {
				return durable.Children("ok", durable.InsertParams{Args: fsm.With(touchy{Boom: "encode"})}), nil
			},
		},
	})
	var calls int
	flaky := mustFSM(t, durable.FSMConfig[string]{
		Name: "flaky", Initial: "once", MaxAttempts: 3,
		Backoff: func(int) time.Duration { panic("backoff") },
		Steps: map[string]durable.StepFunc[string]{
			"once": func(context.Context, *durable.Step[string]) (durable.Outcome, error) {
				if calls++; calls == 1 {
					return durable.Outcome{}, errors.New("first attempt fails")
				}
				return durable.Done(nil), nil
			},
		},
	})
	cfg := fast(fsm, flaky)
	cfg.Queues = map[string]durable.QueueConfig{durable.DefaultQueue: {Concurrency: 1}} // calls is unguarded
	b := setup(t, cfg)
	b.start(t)

	for _, tc := range []struct {
		step, state, reason, panicked string
	}{
		{"ok", "decode", "does not decode", "JSON decoding panicked"},
		{"state", "", "state does not encode", "JSON encoding panicked"},
		{"result", "", "result does not encode", "JSON encoding panicked"},
		{"child", "", "Children[0]", "JSON encoding panicked"},
	} {
		id := b.insert(t, fsm.With(touchy{Boom: tc.state}), &durable.InsertOpts{Step: tc.step})
		in := b.waitStatus(t, id, durable.StatusFailed)
		if !strings.Contains(in.Error, tc.reason) || !strings.Contains(in.Error, tc.panicked) || strings.Contains(in.Error, "step panicked") {
			t.Errorf("step %s: error %q, want it to say %q and %q, not that the step panicked", tc.step, in.Error, tc.reason, tc.panicked)
		}
		if in.Step != tc.step {
			t.Errorf("step %s: failed at step %q", tc.step, in.Step)
		}
		want := `{}`
		if tc.state != "" {
			want = `{"boom": "` + tc.state + `"}`
		}
		if string(in.State) != want {
			t.Errorf("step %s: state %s, want it unchanged: %s", tc.step, in.State, want)
		}
	}

	id := b.insert(t, flaky.With(""), nil)
	in := b.waitStatus(t, id, durable.StatusDone)
	if in.Attempt != 2 {
		t.Errorf("flaky: done at attempt %d, want 2 (retried after its Backoff panicked)", in.Attempt)
	}
}

// panickyStep is a step that panics, named so that its frame can be found
// in a logged stack.
func panickyStep(context.Context, *durable.Step[string]) (durable.Outcome, error) {
	panic("panickyStep: boom")
}

// TestStepPanicsAreLoggedWithTheirStack checks that the engine logs a step
// that panicked as an error, with the stack of the panic, and not only the
// panic's value, which says nothing of where it happened.
func TestStepPanicsAreLoggedWithTheirStack(t *testing.T) {
	t.Parallel()
	fsm := mustFSM(t, durable.FSMConfig[string]{
		Name: "panicky", Initial: "boom", MaxAttempts: 1,
		Steps: map[string]durable.StepFunc[string]{"boom": panickyStep},
	})
	cfg := fast(fsm)
	logs := &syncbuf.Buffer{}
	cfg.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelError}))
	b := setup(t, cfg)
	b.start(t)
	id := b.insert(t, fsm.With(""), nil)
	b.waitStatus(t, id, durable.StatusFailed)
	// The StepStop hook is called once the step's outcome is logged.
	waitFor(t, "the StepStop event", func() bool { return len(b.events.stepEvents()) > 0 })

	var rec map[string]any
	for line := range strings.Lines(logs.String()) {
		var r map[string]any
		if json.Unmarshal([]byte(line), &r) == nil && r["id"] == float64(id) {
			rec = r
		}
	}
	if rec == nil {
		t.Fatalf("no error logged for the step that panicked; logs: %s", logs.String())
	}
	if stack, _ := rec["stack"].(string); !strings.Contains(stack, "panickyStep") {
		t.Errorf("the panic's log record has no stack that names the step's function: %v", rec)
	}
	if e, _ := rec["error"].(string); !strings.Contains(e, "panickyStep: boom") {
		t.Errorf("the panic's log record has no error naming its value: %v", rec)
	}
}

// A value whose MarshalJSON panics, given to Insert as a state or to
// Signal, SignalTx or InsertOrSignal as a payload, fails the call with a
// *PanicError and stores nothing, rather than panicking in the caller; the
// error says that JSON encoding panicked, not a step.
func TestPanickingPayloadsAreErrors(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	b := setup(t, nil)
	live := b.insert(t, ctl.With(ctlState{}), nil)
	boom := touchy{Boom: "encode"}
	for name, call := range map[string]func(ctx context.Context) error{
		"Insert": func(ctx context.Context) error {
			_, err := b.client.Insert(ctx, mustFSM(t, durable.FSMConfig[touchy]{
				Name: "touchy", Initial: "a",
				Steps: map[string]durable.StepFunc[touchy]{
					"a": func(context.Context, *durable.Step[touchy]) (durable.Outcome, error) { return durable.Done(nil), nil },
				},
			}).With(boom), nil)
			return err
		},
		"Signal": func(ctx context.Context) error {
			return b.client.Signal(ctx, durable.ByID(live), "go", boom, "")
		},
		"SignalTx": func(ctx context.Context) error {
			tx, err := b.pool.Begin(ctx)
			if err != nil {
				return err
			}
			defer func() { _ = tx.Rollback(ctx) }()
			return b.client.SignalTx(ctx, tx, durable.ByID(live), "go", boom, "")
		},
		"InsertOrSignal": func(ctx context.Context) error {
			_, _, err := b.client.InsertOrSignal(ctx, ctl.With(ctlState{}), &durable.InsertOpts{CorrelationKey: "k"}, "go", boom, "")
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			err := func() (err error) {
				defer func() {
					if v := recover(); v != nil {
						t.Fatalf("%s panicked: %v", name, v)
					}
				}()
				return call(ctxT(t))
			}()
			pe, ok := errors.AsType[*durable.PanicError](err)
			if !ok {
				t.Fatalf("%s: error %v, want a *PanicError", name, err)
			}
			if pe.What != "JSON encoding" {
				t.Errorf("%s: PanicError.What = %q, want \"JSON encoding\"", name, pe.What)
			}
			if msg := err.Error(); !strings.Contains(msg, "JSON encoding panicked: touchy: encode") || strings.Contains(msg, "step") {
				t.Errorf("%s: error %q, want it to say that JSON encoding panicked, and no step", name, msg)
			}
		})
	}
	if n := b.count(t, `SELECT count(*) FROM durable_signal`); n != 0 {
		t.Errorf("%d signals stored, want none", n)
	}
	if n := b.count(t, `SELECT count(*) FROM durable_instance`); n != 1 {
		t.Errorf("%d instances, want only the one signalled", n)
	}
}
