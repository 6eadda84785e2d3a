package durable

import (
	"context"
	"encoding/json"
	"time"
)

// StepFunc is one named step of an FSM. It does a short piece of work and
// returns the outcome to commit. It may change step.State; the changed state
// is committed with the outcome. A step runs at least once per outcome the
// engine commits: after a crash, a lost lease or a Retry it runs again with
// the state as it was committed before it, so it must be idempotent (use
// idem.Do or a key from idem.Minter for side effects outside the database).
//
// An error, or a panic, is handled by the FSM's error handling (see
// FSMConfig.OnError); the changes the step made to step.State are then
// discarded. A panic (a *PanicError) is also logged, as an error, with
// its stack (Config.Logger).
//
// ctx is cancelled when the engine stops hard (Stop's context ended before
// the step returned) or when the engine learns, at a heartbeat, that it lost
// the step's lease; the outcome of a step whose lease is lost is not
// committed.
type StepFunc[S any] func(ctx context.Context, step *Step[S]) (Outcome, error)

// Step is what a step function gets: the instance's identity, the attempt,
// its state and the signals in its inbox.
type Step[S any] struct {
	ID             int64  // the instance's id
	FSM            string // the FSM's name
	Version        int    // the FSM version the instance runs
	Name           string // the step's name
	Queue          string // the queue it was picked from
	CorrelationKey string // "" when it has none
	// Attempt is 1 on the first run of the step after Next, Await or
	// Insert, and grows by one with each Retry and each lease the reaper
	// took back.
	Attempt int

	// State is the instance's state, decoded from the row. Changes are
	// committed with the step's outcome.
	State S

	// Awaited are the signals in the inbox, oldest first, whose names the
	// Await that woke this step named. Empty when the step was not woken by
	// an Await, or when the Await timed out. They are consumed (deleted, by
	// id) when the step's outcome is Next, Await or Children; Retry keeps
	// them, and Done, Stop and Cancel delete the whole inbox.
	Awaited []Signal
	// Pending is every signal in the inbox when the step was picked,
	// Awaited included, oldest first. Signals that are not awaited stay in
	// the inbox.
	Pending []Signal
	// TimedOut reports that the step was woken by the deadline of an
	// AwaitTimeout, with no awaited signal.
	TimedOut bool
}

// Signal is one signal in an instance's inbox.
type Signal struct {
	ID         int64           // the inbox row's id; signals are consumed by it
	Name       string          // what Await matches on
	Payload    json.RawMessage // as given to Signal, encoded as JSON
	DedupKey   string          // "" when none was given
	InsertedAt time.Time       // when the signal was stored
}
