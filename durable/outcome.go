package durable

import (
	"errors"
	"fmt"
	"time"
)

// OutcomeKind names what a step decided. It is reported in
// StepStopEvent.Kind, and is not stored: the instance's row records the
// outcome's effect (step, status), never its kind. The values are the
// design's names of the step-stop telemetry event's kind: "next", "retry",
// "await", "schedule_childs" (KindChildren), "done" and "stop"; "cancel"
// (KindCancel) is this engine's addition, for an outcome the design does
// not have.
type OutcomeKind string

// The outcome kinds.
const (
	KindNext  OutcomeKind = "next"
	KindRetry OutcomeKind = "retry"
	KindAwait OutcomeKind = "await"
	KindDone  OutcomeKind = "done"
	KindStop  OutcomeKind = "stop"
	// KindCancel is Cancel's kind: the instance ends as cancelled.
	KindCancel OutcomeKind = "cancel"
)

// Outcome is what a step returns: the one thing the engine commits, with
// the instance's state, before anything else happens to the instance. Make
// one with Next, Retry, Await, AwaitTimeout, Children, Done, Stop or Cancel; the zero Outcome
// is invalid and handled as a step error.
type Outcome struct {
	kind    OutcomeKind
	step    string
	delay   time.Duration
	signals []string
	timeout time.Duration
	result  any
	reason  string

	children []InsertParams // Children's
}

// Next moves the instance to step, runnable at once, with the attempt reset
// to 1. It consumes the awaited signals the step saw.
func Next(step string) Outcome { return Outcome{kind: KindNext, step: step} }

// Retry runs the same step again after delay (0: at once), with the attempt
// increased by one. It consumes no signals. Retry is never capped by the
// FSM's MaxAttempts, which bounds only the default error handling.
func Retry(delay time.Duration) Outcome { return Outcome{kind: KindRetry, delay: delay} }

// Await parks the instance until a signal whose name is one of names is in
// its inbox, then runs step with the attempt reset to 1. A matching signal
// already in the inbox (delivered before or while the step ran) wakes it at
// once. It consumes the awaited signals the step saw before it parks.
func Await(step string, names ...string) Outcome {
	return Outcome{kind: KindAwait, step: step, signals: names}
}

// AwaitTimeout is Await with a deadline: if no matching signal arrives
// within timeout, step runs with no awaited signals and Step.TimedOut set.
// A signal that arrives before the deadline wins; one that arrives after
// it, but before the woken step is picked, is still seen by that step. A
// timeout of 0 sets no deadline: it is Await.
func AwaitTimeout(step string, timeout time.Duration, names ...string) Outcome {
	o := Await(step, names...)
	o.timeout = timeout
	return o
}

// Done ends the instance successfully with result, stored as JSON (nil:
// JSON null). Its inbox is deleted.
func Done(result any) Outcome { return Outcome{kind: KindDone, result: result} }

// Stop ends the instance as failed with reason. Its inbox is deleted.
func Stop(reason string) Outcome { return Outcome{kind: KindStop, reason: reason} }

// Cancel ends the instance as cancelled, with reason as its error, as
// Client.Cancel would: its live descendants (children revived by
// Client.Retry after they released it) are cancelled with it. Its inbox
// is deleted. Unlike Stop, a cancelled instance cannot be retried (see
// Client.Retry).
func Cancel(reason string) Outcome { return Outcome{kind: KindCancel, reason: reason} }

// Kind reports what the outcome does; "" for the zero Outcome.
func (o Outcome) Kind() OutcomeKind { return o.kind }

// Step is the step Next or Await goes to.
func (o Outcome) Step() string { return o.step }

func (o Outcome) String() string {
	switch o.kind {
	case KindNext:
		return fmt.Sprintf("next(%s)", o.step)
	case KindRetry:
		return fmt.Sprintf("retry(%s)", o.delay)
	case KindAwait:
		if o.timeout > 0 {
			return fmt.Sprintf("await(%v→%s within %s)", o.signals, o.step, o.timeout)
		}
		return fmt.Sprintf("await(%v→%s)", o.signals, o.step)
	case KindDone:
		return "done"
	case KindStop:
		return fmt.Sprintf("stop(%s)", o.reason)
	case KindCancel:
		return fmt.Sprintf("cancel(%s)", o.reason)
	case KindChildren:
		return fmt.Sprintf("children(%d→%s)", len(o.children), o.step)
	}
	return "invalid outcome"
}

// errZeroOutcome is the step error of a step that returned no outcome.
var errZeroOutcome = errors.New("durable: step returned the zero Outcome")

// check reports why o cannot be committed for an FSM with the given steps.
func (o Outcome) check(hasStep func(string) bool, limit int) error {
	switch o.kind {
	case "":
		return errZeroOutcome
	case KindNext, KindAwait, KindChildren:
		if !hasStep(o.step) {
			return fmt.Errorf("%w %q in %s", ErrUnknownStep, o.step, o)
		}
		if o.kind == KindChildren {
			return checkChildren(o.children, limit)
		}
		if o.kind == KindAwait {
			if len(o.signals) == 0 {
				return errors.New("durable: Await names no signal")
			}
			for _, n := range o.signals {
				if n == "" {
					return errors.New("durable: Await names an empty signal")
				}
				if err := checkIndexed("Await signal name", n); err != nil {
					return err
				}
			}
			if o.timeout < 0 {
				return fmt.Errorf("durable: AwaitTimeout with a negative timeout %s", o.timeout)
			}
		}
	case KindRetry:
		if o.delay < 0 {
			return fmt.Errorf("durable: Retry with a negative delay %s", o.delay)
		}
	}
	return nil
}
