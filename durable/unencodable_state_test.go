package durable_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/idemgo/idem/durable"
)

// ledger is a state with a number that JSON cannot encode once a step
// divides by zero: json.Marshal fails on NaN.
type ledger struct {
	Ratio float64 `json:"ratio"`
}

// TestUnencodableStateOrResultGoesToTheErrorHandling checks that a step
// whose new state, or Done result, does not encode as JSON (a NaN, a
// MarshalJSON that fails or panics) fails as any step error does: its
// changes are discarded and the FSM's error handling is handed the error
// (a *PanicError for a panic), rather than the instance being stopped at
// once with no say for OnError, which is where a workflow compensates.
func TestUnencodableStateOrResultGoesToTheErrorHandling(t *testing.T) {
	t.Parallel()
	var (
		mu   sync.Mutex
		errs = map[int64]error{}
	)
	fsm := mustFSM(t, durable.FSMConfig[ledger]{
		Name: "unencodable", Initial: "nan",
		Steps: map[string]durable.StepFunc[ledger]{
			"nan": func(_ context.Context, s *durable.Step[ledger]) (durable.Outcome, error) {
				s.State.Ratio = math.NaN()
				return durable.Next("compensate"), nil
			},
			"nan_result": func(context.Context, *durable.Step[ledger]) (durable.Outcome, error) {
				return durable.Done(math.Inf(1)), nil
			},
			"compensate": func(_ context.Context, s *durable.Step[ledger]) (durable.Outcome, error) {
				return durable.Done("compensated"), nil
			},
		},
		OnError: func(_ context.Context, s *durable.Step[ledger], err error) durable.Outcome {
			mu.Lock()
			errs[s.ID] = err
			mu.Unlock()
			s.State.Ratio = 1
			return durable.Next("compensate")
		},
	})
	touchyFSM := mustFSM(t, durable.FSMConfig[touchy]{
		Name: "unencodable-touchy", Initial: "state",
		Steps: map[string]durable.StepFunc[touchy]{
			"state": func(_ context.Context, s *durable.Step[touchy]) (durable.Outcome, error) {
				s.State.Boom = "encode"
				return durable.Next("compensate"), nil
			},
			"compensate": func(context.Context, *durable.Step[touchy]) (durable.Outcome, error) {
				return durable.Done("compensated"), nil
			},
		},
		OnError: func(_ context.Context, s *durable.Step[touchy], err error) durable.Outcome {
			mu.Lock()
			errs[s.ID] = err
			mu.Unlock()
			return durable.Next("compensate")
		},
	})
	b := setup(t, fast(fsm, touchyFSM))
	b.start(t)

	for _, tc := range []struct {
		name  string
		args  durable.Args
		step  string
		want  string
		panic bool
	}{
		{"NaN state", fsm.With(ledger{}), "nan", "NaN", false},
		{"Inf result", fsm.With(ledger{}), "nan_result", "+Inf", false},
		{"panicking MarshalJSON", touchyFSM.With(touchy{}), "state", "touchy: encode", true},
	} {
		id := b.insert(t, tc.args, &durable.InsertOpts{Step: tc.step})
		in := b.waitStatus(t, id, durable.StatusDone)
		if string(in.Result) != `"compensated"` {
			t.Errorf("%s: result %s, want the compensation's", tc.name, in.Result)
		}
		mu.Lock()
		err := errs[id]
		mu.Unlock()
		switch {
		case err == nil:
			t.Errorf("%s: the error handling was not called", tc.name)
		case !strings.Contains(err.Error(), tc.want):
			t.Errorf("%s: error handling given %q, want it to say %q", tc.name, err, tc.want)
		case tc.panic && !errors.As(err, new(*durable.PanicError)):
			t.Errorf("%s: error handling given %v (%T), want a *PanicError", tc.name, err, err)
		}
	}
}
