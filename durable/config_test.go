package durable_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem/durable"
)

// TestInvalidDefinitionsNameTheField pins that every definition NewFSM
// rejects comes back as a *ConfigError naming the field at fault.
func TestInvalidDefinitionsNameTheField(t *testing.T) {
	t.Parallel()
	step := func(context.Context, *durable.Step[int]) (durable.Outcome, error) { return durable.Done(nil), nil }
	steps := map[string]durable.StepFunc[int]{"a": step}
	for name, tc := range map[string]struct {
		cfg   durable.FSMConfig[int]
		field string
	}{
		"empty name":       {durable.FSMConfig[int]{Initial: "a", Steps: steps}, "FSMConfig.Name"},
		"long name":        {durable.FSMConfig[int]{Name: strings.Repeat("n", 129), Initial: "a", Steps: steps}, "FSMConfig.Name"},
		"negative version": {durable.FSMConfig[int]{Name: "x", Version: -1, Initial: "a", Steps: steps}, "FSMConfig.Version"},
		"huge version":     {durable.FSMConfig[int]{Name: "x", Version: 1 << 40, Initial: "a", Steps: steps}, "FSMConfig.Version"},
		"no initial":       {durable.FSMConfig[int]{Name: "x", Steps: steps}, "FSMConfig.Initial"},
		"initial missing":  {durable.FSMConfig[int]{Name: "x", Initial: "b", Steps: steps}, "FSMConfig.Initial"},
		"no steps":         {durable.FSMConfig[int]{Name: "x", Initial: "a"}, "FSMConfig.Steps"},
		"nil step":         {durable.FSMConfig[int]{Name: "x", Initial: "a", Steps: map[string]durable.StepFunc[int]{"a": step, "b": nil}}, `FSMConfig.Steps["b"]`},
		"unnamed step":     {durable.FSMConfig[int]{Name: "x", Initial: "a", Steps: map[string]durable.StepFunc[int]{"a": step, "": step}}, "FSMConfig.Steps"},
		"bad queue":        {durable.FSMConfig[int]{Name: "x", Initial: "a", Steps: steps, Queue: strings.Repeat("q", 129)}, "FSMConfig.Queue"},
		"max attempts":     {durable.FSMConfig[int]{Name: "x", Initial: "a", Steps: steps, MaxAttempts: -1}, "FSMConfig.MaxAttempts"},
	} {
		f, err := durable.NewFSM(tc.cfg)
		checkConfigError(t, name, f, err, tc.field)
		// The nil *FSM that comes with the error answers zero values, as
		// the rest of the API takes it without panicking.
		if f == nil && (f.Name() != "" || f.Version() != 0) {
			t.Errorf("%s: nil *FSM has name %q, version %d", name, f.Name(), f.Version())
		}
	}
}

// TestInvalidConfigsNameTheField does the same for NewClient.
func TestInvalidConfigsNameTheField(t *testing.T) {
	t.Parallel()
	pool := newPool(t, "postgres://127.0.0.1:1/none") // never connected
	ctl := ctlFSM(t)
	for name, tc := range map[string]struct {
		cfg   durable.Config
		field string
	}{
		"zero concurrency":  {durable.Config{Queues: map[string]durable.QueueConfig{"q": {}}}, `Config.Queues["q"].Concurrency`},
		"negative prefetch": {durable.Config{Queues: map[string]durable.QueueConfig{"q": {Concurrency: 1, Prefetch: -1}}}, `Config.Queues["q"].Prefetch`},
		"empty queue name":  {durable.Config{Queues: map[string]durable.QueueConfig{"": {Concurrency: 1}}}, `Config.Queues[""]`},
		"heartbeat":         {durable.Config{LeaseTTL: time.Second, HeartbeatInterval: time.Second}, "Config.HeartbeatInterval"},
		"negative lease":    {durable.Config{LeaseTTL: -time.Second}, "Config.LeaseTTL"},
		"negative poll":     {durable.Config{PollInterval: -1}, "Config.PollInterval"},
		"negative batch":    {durable.Config{GCBatch: -1}, "Config.GCBatch"},
		"twice":             {durable.Config{FSMs: []durable.Definition{ctl, ctl}}, "Config.FSMs"},
		"nil FSM":           {durable.Config{FSMs: []durable.Definition{nil}}, "Config.FSMs"},
		"nil *FSM":          {durable.Config{FSMs: []durable.Definition{ctl, (*durable.FSM[int])(nil)}}, "Config.FSMs"},
		"rate no limit":     {durable.Config{RateLimits: map[string]durable.RateLimit{"api": {}}}, `Config.RateLimits["api"].Limit`},
		"rate period":       {durable.Config{RateLimits: map[string]durable.RateLimit{"api": {Limit: 1, Period: -time.Second}}}, `Config.RateLimits["api"].Period`},
		"rate burst":        {durable.Config{RateLimits: map[string]durable.RateLimit{"api": {Limit: 1, Burst: -1}}}, `Config.RateLimits["api"].Burst`},
		"rate name colon":   {durable.Config{RateLimits: map[string]durable.RateLimit{"a:b": {Limit: 1}}}, `Config.RateLimits["a:b"]`},
		"rate empty name":   {durable.Config{RateLimits: map[string]durable.RateLimit{"": {Limit: 1}}}, `Config.RateLimits[""]`},
	} {
		c, err := durable.NewClient(pool, &tc.cfg)
		checkConfigError(t, name, c, err, tc.field)
	}
}

func checkConfigError[T any](t *testing.T, name string, got *T, err error, field string) {
	t.Helper()
	var ce *durable.ConfigError
	switch {
	case err == nil:
		t.Errorf("%s: accepted: %v", name, got)
	case !errors.As(err, &ce) || !errors.Is(err, durable.ErrInvalidConfig):
		t.Errorf("%s: error %v (%T) is no *ConfigError", name, err, err)
	case ce.Field != field:
		t.Errorf("%s: Field %q, want %q (%v)", name, ce.Field, field, err)
	case !strings.Contains(err.Error(), field):
		t.Errorf("%s: error %q does not name %s", name, err, field)
	}
}
