package durable

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/idemgo/idem/internal/pgstorable"
)

// DefaultQueue is the queue of an FSM whose FSMConfig.Queue is empty.
const DefaultQueue = "default"

// DefaultMaxAttempts is the default of FSMConfig.MaxAttempts.
const DefaultMaxAttempts = 25

// ErrorHandler decides the outcome of a step that returned an error,
// panicked (err is a *PanicError) or returned an outcome that cannot be
// committed (an unknown step, say, or a new state or Done result that does
// not encode as JSON, such as a NaN). step.State is the state the step was
// given, before its changes; the handler's changes are committed with the
// outcome it returns, which may be any outcome. A handler that panics, or
// returns an outcome that cannot be committed, gets the default error
// handling instead: a handler that decides on some errors only returns the
// zero Outcome for the others, which the default handling then retries
// with the FSM's Backoff up to its MaxAttempts.
type ErrorHandler[S any] func(ctx context.Context, step *Step[S], err error) Outcome

// FSMConfig defines an FSM whose state is S, stored in the row as JSON
// (encoding/json).
type FSMConfig[S any] struct {
	// Name identifies the FSM in rows and telemetry: 1–128 bytes. Required.
	Name string

	// Version is stored with each instance at insert. An engine runs only
	// the versions it is configured with, so an old version can keep
	// running beside a new one under the same Name. Defaults to 1.
	Version int

	// Initial is the step a new instance starts at, unless InsertOpts.Step
	// says otherwise. It must be a key of Steps. Required.
	Initial string

	// Queue is the queue new instances go to, unless InsertOpts.Queue says
	// otherwise. Defaults to DefaultQueue ("default").
	Queue string

	// Steps are the step functions by name. Required: at least Initial.
	Steps map[string]StepFunc[S]

	// OnError decides the outcome of a step that failed. It is not called
	// for a step that failed once the engine's hard stop or the lapse of
	// its lease had cancelled its context: that failure is not the step's,
	// and its row is handed back to run again (see Client.Stop). Defaults
	// to nil:
	// the default error handling, which retries with Backoff while the
	// attempt is below MaxAttempts and then stops the instance with the
	// error's text as the reason.
	OnError ErrorHandler[S]

	// MaxAttempts is how many attempts of one step the default error
	// handling makes before it stops the instance. Defaults to
	// DefaultMaxAttempts (25).
	MaxAttempts int

	// Backoff gives the delay after a failed attempt under the default
	// error handling; if it panics, DefaultBackoff's delay is used.
	// Defaults to DefaultBackoff.
	Backoff func(attempt int) time.Duration

	// StepTimeout bounds each run of a step. When it passes, the step's
	// context is cancelled; a step that then returns an error fails with
	// an error that matches ErrStepTimeout (errors.Is) and gets the error
	// handling, like any failed attempt. From that moment the engine also
	// stops extending the row's lease, so a step that ignores its context
	// and never returns loses the row to the reaper once the lease runs
	// out: the instance runs again elsewhere (counted toward
	// Config.MaxReaps), while the stuck call keeps its worker until it
	// returns, because Go cannot stop a goroutine. Zero sets no timeout.
	// Defaults to no timeout.
	StepTimeout time.Duration
}

// FSM is a validated FSM definition. It is immutable and safe for
// concurrent use; list it in Config.FSMs for an engine to run it, and make
// instances of it with With.
type FSM[S any] struct {
	cfg FSMConfig[S]
}

// Definition is an FSM of any state type, as Config.FSMs lists them.
// *FSM[S] implements it; nothing else can. A nil *FSM[S] (what NewFSM
// returns with its error) is no definition: NewClient refuses it in
// Config.FSMs with a *ConfigError, and the inserts refuse its Args.
type Definition interface {
	isNil() bool
	meta() fsmMeta
	run(ctx context.Context, c *claimed, limit int, interrupted func() string) ranStep
	stepTimeout() time.Duration
}

// fsmMeta is what the engine and the inserts need of a definition.
type fsmMeta struct {
	name    string
	version int
	initial string
	queue   string
	hasStep func(string) bool
}

// NewFSM validates cfg, fills in its defaults and returns the FSM. Its
// errors name the field.
func NewFSM[S any](cfg FSMConfig[S]) (*FSM[S], error) {
	switch {
	case cfg.Name == "" || len(cfg.Name) > 128:
		return nil, configErrorf("FSMConfig.Name", "must be 1–128 bytes, got %q", cfg.Name)
	case pgstorable.Text(cfg.Name) != nil:
		return nil, configErrorf("FSMConfig.Name", "%q %v", cfg.Name, pgstorable.Text(cfg.Name))
	case cfg.Version < 0:
		return nil, configErrorf("FSMConfig.Version", "must not be negative, got %d", cfg.Version)
	case cfg.Version > math.MaxInt32:
		return nil, configErrorf("FSMConfig.Version", "must be at most %d, got %d", math.MaxInt32, cfg.Version)
	case cfg.MaxAttempts < 0:
		return nil, configErrorf("FSMConfig.MaxAttempts", "must not be negative, got %d", cfg.MaxAttempts)
	case cfg.StepTimeout < 0:
		return nil, configErrorf("FSMConfig.StepTimeout", "must not be negative, got %s", cfg.StepTimeout)
	case len(cfg.Steps) == 0:
		return nil, configErrorf("FSMConfig.Steps", "is empty")
	case cfg.Initial == "":
		return nil, configErrorf("FSMConfig.Initial", "is empty")
	}
	if _, ok := cfg.Steps[cfg.Initial]; !ok {
		return nil, configErrorf("FSMConfig.Initial", "%q is not in Steps", cfg.Initial)
	}
	steps := make(map[string]StepFunc[S], len(cfg.Steps))
	for name, fn := range cfg.Steps {
		switch {
		case name == "":
			return nil, configErrorf("FSMConfig.Steps", "has a step with an empty name")
		case pgstorable.Text(name) != nil:
			return nil, configErrorf("FSMConfig.Steps", "has a step named %q, which %v", name, pgstorable.Text(name))
		case fn == nil:
			return nil, configErrorf(fmt.Sprintf("FSMConfig.Steps[%q]", name), "is a nil function")
		}
		steps[name] = fn
	}
	cfg.Steps = steps
	if cfg.Version == 0 {
		cfg.Version = 1
	}
	if cfg.Queue == "" {
		cfg.Queue = DefaultQueue
	}
	if err := checkQueueName(cfg.Queue); err != nil {
		return nil, configErrorf("FSMConfig.Queue", "%v", err)
	}
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.Backoff == nil {
		cfg.Backoff = DefaultBackoff
	}
	return &FSM[S]{cfg: cfg}, nil
}

// Name returns the FSM's name, or "" for a nil *FSM (what NewFSM returns
// with its error), as the rest of the API takes a nil *FSM without
// panicking.
func (f *FSM[S]) Name() string {
	if f == nil {
		return ""
	}
	return f.cfg.Name
}

// Version returns the FSM's version, or 0 for a nil *FSM.
func (f *FSM[S]) Version() int {
	if f == nil {
		return 0
	}
	return f.cfg.Version
}

// With returns a new instance of f with state as its initial state, for
// Client.Insert and its relatives. The Args of a nil f are rejected by
// the inserts with an error.
func (f *FSM[S]) With(state S) Args { return Args{def: f, state: state} }

func (f *FSM[S]) isNil() bool { return f == nil }

func (f *FSM[S]) meta() fsmMeta {
	return fsmMeta{
		name:    f.cfg.Name,
		version: f.cfg.Version,
		initial: f.cfg.Initial,
		queue:   f.cfg.Queue,
		hasStep: f.hasStep,
	}
}

func (f *FSM[S]) stepTimeout() time.Duration { return f.cfg.StepTimeout }

func (f *FSM[S]) hasStep(name string) bool {
	_, ok := f.cfg.Steps[name]
	return ok
}

// Args is a new instance of an FSM with its initial state, ready to be
// inserted. Make it with FSM.With; the zero Args is rejected by Insert.
type Args struct {
	def   Definition
	state any
}

// checkQueueName reports why name cannot be a queue, as a phrase that
// follows the field's name.
func checkQueueName(name string) error {
	if name == "" || len(name) > 128 {
		return fmt.Errorf("must be 1–128 bytes, got %q", name)
	}
	if err := pgstorable.Text(name); err != nil {
		return fmt.Errorf("%q %w", name, err)
	}
	return nil
}
