package durable

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"time"
)

// ranStep is what running a step produced: the outcome to commit and what
// goes with it.
type ranStep struct {
	outcome  Outcome
	state    []byte // the state to commit
	result   []byte // Done's result, as JSON
	errText  string // stored in the error column: Stop's reason, or the error a retry follows
	err      error  // the step's error, when the outcome came from the error handling
	duration time.Duration
	// handBack, when not empty, names what interrupted the step, which
	// failed: the stop or the lapse of its lease. Its row is handed back,
	// with no outcome, and the error handling was not called.
	handBack string
}

// run runs the step of c and decides its outcome. It never panics and
// always returns an outcome that can be committed, whose state and result
// take at most limit bytes of JSON (see Config.MaxPayload) unless the
// state is the one c was claimed with, or, when the step failed and
// interrupted (asked once, before the error handling) names a cause, the
// step's error to hand its row back with.
func (f *FSM[S]) run(ctx context.Context, c *claimed, limit int, interrupted func() string) ranStep {
	step := &Step[S]{
		ID:             c.id,
		FSM:            c.fsm,
		Version:        c.version,
		Name:           c.step,
		Queue:          c.queue,
		CorrelationKey: c.correlationKey,
		Attempt:        c.attempt,
		Awaited:        c.awaited(),
		Pending:        c.inbox,
	}
	step.TimedOut = len(c.awaiting) > 0 && len(step.Awaited) == 0

	var (
		out       Outcome
		err       error
		undecoded bool
		start     = time.Now()
	)
	if derr := unmarshalJSON(c.state, &step.State); derr != nil {
		err = fmt.Errorf("durable: state of instance %d does not decode as %T: %w", c.id, step.State, derr)
		undecoded = true
	} else if c.inboxErr != nil {
		err = c.inboxErr
	} else if fn, ok := f.cfg.Steps[c.step]; !ok {
		err = fmt.Errorf("%w %q in FSM %q version %d", ErrUnknownStep, c.step, f.cfg.Name, f.cfg.Version)
	} else {
		out, err = callStep(ctx, fn, step)
		if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) && c.overdue.Load() != 0 {
			err = &StepTimeoutError{Timeout: f.cfg.StepTimeout, Err: err}
		}
		if err == nil {
			err = out.check(f.hasStep, limit)
		}
	}
	duration := time.Since(start)
	if err == nil {
		r := ranStep{outcome: out, duration: duration}
		if err = f.encode(step, &r); err == nil {
			if err = r.check(limit); err == nil {
				return r
			}
		}
	}

	// The step failed. If the engine's stop or the lapse of its lease
	// interrupted it, its row is handed back without the error handling,
	// whose outcome would be thrown away and whose side effects would be
	// for a failure that is not the step's.
	if why := interrupted(); why != "" {
		return ranStep{err: err, duration: duration, handBack: why}
	}
	// Else its changes are discarded and the error handling decides.
	var fresh S
	_ = unmarshalJSON(c.state, &fresh)
	step.State = fresh
	out = f.handle(ctx, step, c.state, err, limit)
	r := withError(out, err, duration)
	encodeErr := f.encode(step, &r)
	if undecoded {
		r.state = c.state // never overwrite a state that could not be read
	}
	if encodeErr != nil || r.check(limit) != nil { // the handler's outcome cannot be stored either
		r = withError(defaultHandling(step.Attempt, f.cfg.MaxAttempts, f.cfg.Backoff, err), err, duration)
		r.state = c.state
	}
	return r
}

// withError is the ranStep of out, decided by the error handling of err.
func withError(out Outcome, err error, duration time.Duration) ranStep {
	r := ranStep{outcome: out, err: err, duration: duration}
	switch out.kind {
	case KindRetry:
		r.errText = errorText(err)
	case KindStop, KindCancel:
		r.errText = out.reason
	}
	return r
}

// check returns a *PayloadTooLargeError when r's state or result is larger
// than limit bytes, and an ErrUnstorable error when jsonb cannot store one.
func (r *ranStep) check(limit int) error {
	if err := checkPayload("state", r.state, limit); err != nil {
		return err
	}
	return checkPayload("result", r.result, limit)
}

// callStep calls fn, turning a panic into a *PanicError.
func callStep[S any](ctx context.Context, fn StepFunc[S], step *Step[S]) (out Outcome, err error) {
	defer recoverPanic(&err, "step")
	return fn(ctx, step)
}

// recoverPanic, deferred, turns a panic of the function that deferred it
// into a *PanicError in *err, saying that what panicked; its other results
// are left zero.
func recoverPanic(err *error, what string) {
	if v := recover(); v != nil {
		*err = &PanicError{Value: v, Stack: debug.Stack(), What: what}
	}
}

// handle decides the outcome of a failed step: the FSM's error handler if
// it has one and it gives an outcome that can be committed, else the
// default. raw is the state as loaded, which step.State is reset to when
// the handler fails.
func (f *FSM[S]) handle(ctx context.Context, step *Step[S], raw []byte, stepErr error, limit int) Outcome {
	if f.cfg.OnError != nil {
		out, ok := func() (out Outcome, ok bool) {
			defer func() {
				if recover() != nil {
					ok = false
				}
			}()
			out = f.cfg.OnError(ctx, step, stepErr)
			return out, out.check(f.hasStep, limit) == nil
		}()
		if ok {
			return out
		}
		var fresh S // the handler's changes are discarded too
		_ = unmarshalJSON(raw, &fresh)
		step.State = fresh
	}
	return defaultHandling(step.Attempt, f.cfg.MaxAttempts, f.cfg.Backoff, stepErr)
}

// defaultHandling retries with backoff below maxAttempts, then stops with
// the error's text. A backoff that panics gives DefaultBackoff's delay.
func defaultHandling(attempt, maxAttempts int, backoff func(int) time.Duration, err error) Outcome {
	if attempt < maxAttempts {
		return Retry(max(safeBackoff(backoff, attempt), 0))
	}
	return Stop(errorText(err))
}

// errorText is err.Error(), or, if that panics (a typed nil pointer whose
// Error method dereferences it: `var err *MyError; return out, err`), the
// text fmt gives it ("<nil>", or the panic's): a step's error, like its
// state's JSON methods, must fail the step, not the worker and with it the
// process (and, the row being reaped and run again, the process of every
// engine that picks it in turn).
func errorText(err error) (text string) {
	defer func() {
		if recover() != nil {
			text = fmt.Sprint(err)
		}
	}()
	return err.Error()
}

// panicIn returns the *PanicError in err's chain, if any. A step's error
// whose Unwrap or As method panics (a typed nil pointer, as for
// errorText) holds none, as far as the engine is concerned.
func panicIn(err error) (pe *PanicError, ok bool) {
	defer func() {
		if recover() != nil {
			pe, ok = nil, false
		}
	}()
	return errors.AsType[*PanicError](err)
}

// safeBackoff is backoff(attempt), or DefaultBackoff(attempt) if backoff
// panics: an FSM's function must not take down the worker that runs it.
func safeBackoff(backoff func(int) time.Duration, attempt int) (d time.Duration) {
	defer func() {
		if recover() != nil {
			d = DefaultBackoff(attempt)
		}
	}()
	return backoff(attempt)
}

// marshalJSON and unmarshalJSON are json.Marshal and json.Unmarshal, with a
// panic of a MarshalJSON or UnmarshalJSON method (encoding/json lets those
// through) returned as a *PanicError: the engine encodes and decodes the
// step's values on the worker that runs the step, and such a panic must
// fail the step, not the process (and, the row being reaped and run again,
// the process of every engine that picks it in turn).
func marshalJSON(v any) (b []byte, err error) {
	defer recoverPanic(&err, "JSON encoding")
	return json.Marshal(v)
}

func unmarshalJSON(data []byte, v any) (err error) {
	defer recoverPanic(&err, "JSON decoding")
	return json.Unmarshal(data, v)
}

// encode encodes the state and the Done result of r into it. A state or
// result that does not encode (a NaN, a MarshalJSON that fails or panics)
// is an error, wrapping json's or the *PanicError, for the error handling
// to decide on, as any step error is.
func (f *FSM[S]) encode(step *Step[S], r *ranStep) error {
	if (r.outcome.kind == KindStop || r.outcome.kind == KindCancel) && r.errText == "" {
		r.errText = r.outcome.reason
	}
	state, err := marshalJSON(step.State)
	if err != nil {
		return fmt.Errorf("durable: state does not encode: %w", err)
	}
	r.state = state
	if r.outcome.kind == KindDone {
		if r.result, err = marshalJSON(r.outcome.result); err != nil {
			r.result = nil
			return fmt.Errorf("durable: result does not encode: %w", err)
		}
	}
	return nil
}

// unknownFSM is the outcome of a row whose FSM this engine does not have:
// the default error handling, with the state unchanged.
func unknownFSM(c *claimed) ranStep {
	err := fmt.Errorf("%w: %q version %d", ErrUnknownFSM, c.fsm, c.version)
	out := defaultHandling(c.attempt, DefaultMaxAttempts, DefaultBackoff, err)
	r := ranStep{outcome: out, state: c.state, err: err, errText: err.Error()}
	return r
}
