package durable_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem/durable"
	"github.com/idemgo/idem/internal/pgtest"
	"github.com/idemgo/idem/internal/syncbuf"
)

// panickyHook is a hook that panics, named so that its frame can be found
// in a logged stack.
func panickyHook[E any](E) { panic("panickyHook: boom") }

// TestPanickingHooksAreLoggedAndTheEngineGoesOn checks that a hook that
// panics, called on the engine's goroutines, neither crashes the process
// nor stops the engine: the panic is logged as an error with its stack and
// the hook's name, and the engine runs, collects and stops as if the hook
// had returned.
func TestPanickingHooksAreLoggedAndTheEngineGoesOn(t *testing.T) {
	t.Parallel()
	fsm := mustFSM(t, durable.FSMConfig[int]{
		Name: "hooked", Initial: "a",
		Steps: map[string]durable.StepFunc[int]{
			"a": func(context.Context, *durable.Step[int]) (durable.Outcome, error) { return durable.Done(nil), nil },
		},
	})
	cfg := fast(fsm)
	cfg.GCRetention = time.Millisecond
	cfg.GCInterval = 20 * time.Millisecond
	logs := &syncbuf.Buffer{}
	cfg.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelError}))
	cfg.Hooks = durable.Hooks{
		StepStop:            panickyHook[durable.StepStopEvent],
		PickStop:            panickyHook[durable.PickStopEvent],
		SchedulerSaturation: panickyHook[durable.SaturationEvent],
		SchedulerDrain:      panickyHook[durable.DrainEvent],
		GCSwept:             panickyHook[durable.SweptEvent],
	}
	pool := newPool(t, pgtest.URL(t))
	client, err := durable.NewClient(pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Migrate(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	startClient(t, client)

	// Each instance is picked (PickStop), run and committed (StepStop),
	// then collected (GCSwept): the second is picked and run after the
	// hooks of the first have panicked.
	for i := range 2 {
		id, err := client.Insert(ctxT(t), fsm.With(i), nil)
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the instance to be collected", func() bool {
			var n int
			if err := pool.QueryRow(ctxT(t), "SELECT count(*) FROM durable_instance WHERE id = $1", id).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n == 0
		})
	}
	ctx, cancel := context.WithTimeout(ctxT(t), 20*time.Second)
	defer cancel()
	if err := client.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}

	seen := map[string]bool{}
	for line := range strings.Lines(logs.String()) {
		var r map[string]any
		if json.Unmarshal([]byte(line), &r) != nil || r["msg"] != "durable: hook panicked" {
			continue
		}
		hook, _ := r["hook"].(string)
		seen[hook] = true
		if stack, _ := r["stack"].(string); !strings.Contains(stack, "panickyHook") {
			t.Errorf("the log record of the panic of %s has no stack that names the hook: %v", hook, r)
		}
		if p, _ := r["panic"].(string); p != "panickyHook: boom" {
			t.Errorf("the log record of the panic of %s does not hold its value: %v", hook, r)
		}
	}
	for _, hook := range []string{"StepStop", "PickStop", "SchedulerSaturation", "SchedulerDrain", "GCSwept"} {
		if !seen[hook] {
			t.Errorf("no panic of %s logged; logs: %s", hook, logs.String())
		}
	}
}
