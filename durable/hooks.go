package durable

import (
	"log/slog"
	"runtime/debug"
	"time"
)

// Hooks receive the engine's telemetry events, named after those of the
// GenDurable design ([:gen_durable, :step, :stop] is StepStop, and so on).
// Every field may be nil. Hooks are called synchronously on the engine's
// goroutines: they must return quickly and must not call back into the
// engine's Stop. A hook that panics is logged (Config.Logger, level
// Error, with the hook's name, the panic's value and its stack) and the
// engine goes on as if it had returned: the event is lost, nothing else.
type Hooks struct {
	// StepStop: a step finished and its outcome was committed, or fenced
	// off ([:gen_durable, :step, :stop]).
	StepStop func(StepStopEvent)
	// PickStop: a picker claimed rows for a queue ([:gen_durable, :pick,
	// :stop]).
	PickStop func(PickStopEvent)
	// SchedulerSaturation: a queue's load, once per poll
	// ([:gen_durable, :scheduler, :saturation]).
	SchedulerSaturation func(SaturationEvent)
	// SchedulerDrain: a queue stopped ([:gen_durable, :scheduler, :drain]).
	SchedulerDrain func(DrainEvent)
	// ReaperReaped: expired leases were taken back ([:gen_durable, :reaper,
	// :reaped]).
	ReaperReaped func(ReapedEvent)
	// GCSwept: terminal rows were deleted ([:gen_durable, :gc, :swept]).
	GCSwept func(SweptEvent)
	// ConcurrencyContended: a pick left due rows runnable because their
	// concurrency key was at its limit ([:gen_durable, :concurrency,
	// :contended]); one event per key, at most once per pick.
	ConcurrencyContended func(ConcurrencyContendedEvent)
	// RateLimitThrottled: a pick left due rows runnable because their
	// rate-limit bucket lacked the tokens ([:gen_durable, :rate_limit,
	// :throttled]); one event per bucket, at most once per pick. The sign
	// that a limit is biting.
	RateLimitThrottled func(RateLimitThrottledEvent)
	// RateLimitUnknown: due rows name a rate limit that Config.RateLimits
	// does not have, so no engine with this configuration picks them
	// ([:gen_durable, :rate_limit, :unknown]); one event per key, at most
	// once per pick and per Config.PollInterval of a queue.
	RateLimitUnknown func(RateLimitUnknownEvent)
}

// StepStopEvent describes one finished step.
type StepStopEvent struct {
	ID       int64
	FSM      string
	Step     string
	Attempt  int
	Kind     OutcomeKind   // the outcome committed (or fenced off)
	Duration time.Duration // from the call of the step to its return
	// Err is the step's error or panic, when the outcome came from the
	// error handling; nil otherwise.
	Err error
	// Fenced reports that the outcome was not committed because the
	// engine no longer held the step's lease (it was reaped, and perhaps
	// picked again): nothing changed.
	Fenced bool
	// CommitErr is the error of the outcome's commit, if it failed (the
	// lease then runs out and the reaper returns the row).
	CommitErr error
	// HandedBack reports that the engine's hard stop (Stop's context
	// ended, or Start's), or the lapse of the step's lease (its context's
	// cause is then ErrLeaseLost), cancelled the step, which then failed:
	// nothing was committed, Kind is empty, and the row is runnable again
	// with its attempt unchanged. A lease lost to another claim is
	// Fenced instead.
	HandedBack bool
}

// PickStopEvent describes one claim a picker made.
type PickStopEvent struct {
	Queue  string
	Worker string // the engine's Config.ID
	Count  int    // rows claimed
	Demand int    // rows asked for
}

// SaturationEvent is a queue's load at a poll.
type SaturationEvent struct {
	Queue       string
	InFlight    int // steps running
	Buffer      int // rows claimed and not yet running
	Concurrency int
	Prefetch    int
}

// DrainEvent describes a queue's graceful stop.
type DrainEvent struct {
	Queue    string
	Released int // claimed rows handed back without running
	InFlight int // steps that were running and were waited for
}

// ReapedEvent lists rows whose lease had expired, returned to runnable with
// their attempt increased.
type ReapedEvent struct {
	Count int
	IDs   []int64
}

// SweptEvent counts terminal rows deleted by one garbage collection pass.
type SweptEvent struct {
	Count int
}

// ConcurrencyContendedEvent reports the rows of one concurrency key that a
// pick skipped because the key had as many executing instances as its
// limit allows (counting those cancelled whose steps still run).
//
// It differs from the design's [:gen_durable, :concurrency, :contended]
// event (seed 001), which is one event per row handed back, with
// measurement count and metadata {id, fsm, concurrency_key}: that engine
// claims rows first and then takes an advisory lock per key, handing back
// the rows whose lock is contended. This engine uses slots instead (see
// "Concurrency keys" in the package doc): the pick statement skips the rows
// of a key at its limit, so no row is ever claimed and handed back, and
// there is no row to name. It counts instead, after a pick that left room
// unused, each key's due rows that wait for a slot, in one event per key.
// A dashboard ported from the design should sum Count by Key where it
// counted events by concurrency_key; a per-FSM or per-instance breakdown is
// not reported (list a key's waiting rows in durable_instance if needed).
// Races, a claim losing a key's last slot to another picker, is the nearest
// thing to the design's contended lock.
type ConcurrencyContendedEvent struct {
	Queue  string
	Worker string // the engine's Config.ID
	Key    string // the concurrency key
	Count  int    // its rows among the queue's first due rows the pick looked at
	Limit  int    // the key's limit (Config.ConcurrencyLimits)
	// Races is how many times the pick's claim lost a race for a key's
	// slot to another picker and was repeated.
	Races int
}

// RateLimitThrottledEvent reports the rows of one rate-limit bucket that a
// pick left runnable because the bucket held fewer tokens than the next of
// them costs.
type RateLimitThrottledEvent struct {
	Queue  string
	Worker string // the engine's Config.ID
	Key    string // the bucket: "name" or "name:partition"
	// Wanted is how many due rows of the bucket the pick wanted: those it
	// leased and those it left, counted up to its demand (the room of the
	// queue's workers).
	Wanted int
	// Granted is how many of them it leased, taking their tokens.
	Granted int
}

// RateLimitUnknownEvent reports due rows of a queue whose rate-limit name
// (InsertOpts.RateLimit) has no entry in Config.RateLimits: the engine
// does not pick them.
type RateLimitUnknownEvent struct {
	Queue  string
	Worker string // the engine's Config.ID
	Key    string // the rows' InsertOpts.RateLimit
	Name   string // its name, without the partition
	FSM    string // the FSM of the key's first due row
	Step   string // and its step
	// Count is how many of the key's rows are due, counted up to 1000.
	Count int
}

// guard wraps each hook of h so that a panic in it is logged to log and
// recovered, rather than crashing the engine's process from one of its
// goroutines.
func (h *Hooks) guard(log *slog.Logger) {
	h.StepStop = guardHook(log, "StepStop", h.StepStop)
	h.PickStop = guardHook(log, "PickStop", h.PickStop)
	h.SchedulerSaturation = guardHook(log, "SchedulerSaturation", h.SchedulerSaturation)
	h.SchedulerDrain = guardHook(log, "SchedulerDrain", h.SchedulerDrain)
	h.ReaperReaped = guardHook(log, "ReaperReaped", h.ReaperReaped)
	h.GCSwept = guardHook(log, "GCSwept", h.GCSwept)
	h.ConcurrencyContended = guardHook(log, "ConcurrencyContended", h.ConcurrencyContended)
	h.RateLimitThrottled = guardHook(log, "RateLimitThrottled", h.RateLimitThrottled)
	h.RateLimitUnknown = guardHook(log, "RateLimitUnknown", h.RateLimitUnknown)
}

// guardHook returns fn recovering and logging its panics; nil stays nil,
// so that the engine still skips building the events of absent hooks.
func guardHook[E any](log *slog.Logger, name string, fn func(E)) func(E) {
	if fn == nil {
		return nil
	}
	return func(e E) {
		defer func() {
			if v := recover(); v != nil {
				log.Error("durable: hook panicked", slog.String("hook", name), slog.Any("panic", v), slog.String("stack", string(debug.Stack())))
			}
		}()
		fn(e)
	}
}
