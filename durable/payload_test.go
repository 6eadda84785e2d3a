package durable_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem/durable"
)

// limit is the Config.MaxPayload of these tests.
const limit = 64

// big is a string whose JSON is larger than limit.
var big = strings.Repeat("x", limit)

func checkTooLarge(t *testing.T, what string, err error) {
	t.Helper()
	var pe *durable.PayloadTooLargeError
	if !errors.As(err, &pe) || !errors.Is(err, durable.ErrPayloadTooLarge) {
		t.Fatalf("%s: got %v, want a *PayloadTooLargeError", what, err)
	}
	if pe.Limit != limit || pe.Size <= limit {
		t.Fatalf("%s: %+v", what, pe)
	}
}

func TestOversizedInsertsAndSignalsWriteNothing(t *testing.T) {
	t.Parallel()
	fsm := mustFSM(t, durable.FSMConfig[string]{Name: "s", Initial: "a", Steps: map[string]durable.StepFunc[string]{
		"a": func(context.Context, *durable.Step[string]) (durable.Outcome, error) {
			return durable.Await("a", "x"), nil
		},
	}})
	cfg := fast(fsm)
	cfg.MaxPayload = limit
	b := setup(t, cfg)
	ctx := ctxT(t)

	_, err := b.client.Insert(ctx, fsm.With(big), &durable.InsertOpts{CorrelationKey: "k"})
	checkTooLarge(t, "Insert", err)
	_, err = b.client.InsertAll(ctx, []durable.InsertParams{{Args: fsm.With("small")}, {Args: fsm.With(big)}})
	checkTooLarge(t, "InsertAll", err)
	if n := b.count(t, "SELECT count(*) FROM durable_instance"); n != 0 {
		t.Fatalf("%d rows after rejected inserts", n)
	}
	// The rejected key was never taken.
	id := b.insert(t, fsm.With("small"), &durable.InsertOpts{CorrelationKey: "k"})

	checkTooLarge(t, "Signal", b.client.Signal(ctx, durable.ByKey("k"), "x", big, "d"))
	if n := b.count(t, "SELECT count(*) FROM durable_signal"); n != 0 {
		t.Fatalf("%d signals after a rejected one", n)
	}
	// Nor was its dedup key: the same key with a small payload is stored.
	b.signal(t, durable.ByID(id), "x", "small", "d")
	if n := b.count(t, "SELECT count(*) FROM durable_signal"); n != 1 {
		t.Fatalf("%d signals, want 1", n)
	}
}

func TestOversizedStepOutcomesAreStepErrors(t *testing.T) {
	t.Parallel()
	handled := make(chan error, 4)
	grow := func(_ context.Context, s *durable.Step[string]) (durable.Outcome, error) {
		s.State = big
		return durable.Next("a"), nil
	}
	bigResult := func(context.Context, *durable.Step[string]) (durable.Outcome, error) {
		return durable.Done(big), nil
	}
	handler := mustFSM(t, durable.FSMConfig[string]{
		Name: "handled", Initial: "grow",
		Steps: map[string]durable.StepFunc[string]{"grow": grow, "result": bigResult, "a": bigResult},
		OnError: func(_ context.Context, s *durable.Step[string], err error) durable.Outcome {
			select {
			case handled <- err:
			default: // later retries of "result"
			}
			if s.Name == "result" {
				return durable.Done(big) // too large again: the default handling decides
			}
			return durable.Stop("too large")
		},
	})
	plain := mustFSM(t, durable.FSMConfig[string]{
		Name: "plain", Initial: "grow", MaxAttempts: 2,
		Backoff: func(int) time.Duration { return 0 },
		Steps:   map[string]durable.StepFunc[string]{"grow": grow, "a": bigResult},
	})
	cfg := fast(handler, plain)
	cfg.MaxPayload = limit
	b := setup(t, cfg)
	b.start(t)

	id := b.insert(t, handler.With("small"), nil)
	checkTooLarge(t, "handled state", <-handled)
	if in := b.waitStatus(t, id, durable.StatusFailed); in.Error != "too large" || string(in.State) != `"small"` {
		t.Fatalf("handled state: error %q, state %s", in.Error, in.State)
	}

	id = b.insert(t, handler.With("small"), &durable.InsertOpts{Step: "result"})
	checkTooLarge(t, "handled result", <-handled)
	// MaxAttempts is the default (25): the first attempt is retried.
	in := b.waitStatus(t, id, durable.StatusRunnable)
	if in.Attempt != 2 || !strings.Contains(in.Error, "result of") || in.Result != nil {
		t.Fatalf("handled result: %+v", in)
	}

	id = b.insert(t, plain.With("small"), nil)
	in = b.waitStatus(t, id, durable.StatusFailed)
	if !strings.Contains(in.Error, "Config.MaxPayload") || string(in.State) != `"small"` || in.Attempt != 2 {
		t.Fatalf("default handling: %+v", in)
	}
	if n := b.count(t, "SELECT count(*) FROM durable_instance WHERE status = 'executing'"); n != 0 {
		t.Fatalf("%d rows stuck executing", n)
	}
}
