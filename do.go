package idem

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// DoOpts configure Do. A nil *DoOpts means defaults.
type DoOpts struct {
	// Begin are the options of the underlying Begin (retention, lease).
	Begin *BeginOpts
	// Typed configure encoding and decoding.
	Typed *TypedOpts
	// HeartbeatEvery is how often the lease is extended while fn runs.
	// Defaults to a third of the lease. Negative disables heartbeats.
	HeartbeatEvery time.Duration
	// SettleTimeout bounds the Commit or Fail call after fn returns. That
	// call runs even when ctx is cancelled, so that finished work is
	// recorded. Defaults to 10 seconds.
	SettleTimeout time.Duration
}

// ErrLeaseLost is the cause of the cancellation of fn's context when Do's
// heartbeat finds that the key was taken over (context.Cause reports it).
var ErrLeaseLost = errors.New("idem: lease lost while running")

// Do runs fn at most once per key and replays its result to every later
// call with the same key and request:
//
//   - no record: fn runs; its result is committed and returned;
//   - committed: the stored result is returned, fn does not run;
//   - fn returned an error marked with Permanent: the error is recorded and
//     returned now and to every retry (as a *StoredError);
//   - fn returned another error, or panicked: the key is released (so a
//     retry runs fn again) and the error is returned (the panic re-raised);
//     so it is if fn ended its goroutine (runtime.Goexit);
//   - another caller is running fn: *InFlightError (ErrInFlight);
//   - the key was used with another request: *MismatchError (ErrMismatch).
//
// While fn runs, Do extends the lease in the background; if the key is taken
// over (the lease lapsed), fn's context is cancelled with cause
// ErrLeaseLost. When recording the result fails, Do returns fn's result
// together with the error and frees the key: the effect happened but a
// retry runs it again.
//
// Requests are compared by the RFC 8785 form of their JSON: numbers as
// IEEE-754 doubles (integers beyond 2^53 that differ only in their last
// digits compare equal: send such IDs as strings), and strings as
// encoding/json writes them (invalid UTF-8 becomes U+FFFD: keep bytes in a
// []byte field, which is encoded as base64).
func Do[Req, Res any](ctx context.Context, s Store, key Key, req Req, fn func(ctx context.Context) (Res, error), opts *DoOpts) (Res, error) {
	if opts == nil {
		opts = &DoOpts{}
	}
	t := NewTyped[Req, Res](s, opts.Typed)
	var zero Res
	o, err := t.Begin(ctx, key, req, opts.Begin)
	if err != nil {
		return zero, err
	}
	switch o.Kind {
	case PriorResult:
		return o.Result, nil
	case Fresh:
	default:
		return zero, o.Err()
	}
	return runFresh(ctx, t, key, o.Lease, fn, opts)
}

func runFresh[Req, Res any](ctx context.Context, t *Typed[Req, Res], key Key, lease Lease, fn func(ctx context.Context) (Res, error), opts *DoOpts) (res Res, err error) {
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	k := keepAlivePooled(runCtx, t.store, key, lease, opts.HeartbeatEvery, cancelFunc(cancel))
	settle := func() (context.Context, context.CancelFunc) {
		d := opts.SettleTimeout
		if d <= 0 {
			d = 10 * time.Second
		}
		return context.WithTimeout(context.WithoutCancel(ctx), d)
	}
	returned := false
	defer func() {
		// A panic, or fn that never returned (runtime.Goexit): the key is
		// released.
		p := recover()
		if p == nil && returned {
			return
		}
		k.stop()
		sctx, scancel := settle()
		_ = t.FailTransient(sctx, key, lease)
		scancel()
		if p != nil {
			panic(p)
		}
	}()
	res, err = fn(runCtx)
	returned = true
	k.stop()
	k = nil // a pooled keeper may serve another run now: a panic below must not stop it
	sctx, scancel := settle()
	defer scancel()
	if err != nil {
		var serr error
		if IsPermanent(err) {
			serr = t.FailPermanent(sctx, key, lease, err)
		} else {
			serr = t.FailTransient(sctx, key, lease)
		}
		if serr != nil {
			if !errors.Is(serr, ErrStaleToken) {
				_ = t.FailTransient(sctx, key, lease) // not recorded: a retry runs fn again
			}
			return res, errors.Join(err, fmt.Errorf("idem: recording the failure: %w", serr))
		}
		return res, err
	}
	if cerr := t.Commit(sctx, key, lease, res); cerr != nil {
		if !errors.Is(cerr, ErrStaleToken) {
			// Not recorded (say, a result that does not encode or is too
			// large), and the key not another owner's: free it, so that a
			// retry runs fn again instead of waiting out the lease.
			_ = t.FailTransient(sctx, key, lease)
		}
		return res, fmt.Errorf("idem: result not recorded: %w", cerr)
	}
	return res, nil
}

// KeepAlive extends lease in the background every interval (a third of
// lease.TTL when every is 0) until the returned stop function is called;
// stop waits for the background goroutine to exit. When the store reports
// that the lease is no longer held (ErrStaleToken), KeepAlive calls lost once
// and stops extending. lost runs on the heartbeat, which stop waits for: it
// must not call stop itself (signal the work instead, and stop from there). Other heartbeat errors (an unavailable store) are
// retried at the next tick. A negative every, or a lease without TTL and no
// explicit every, disables it.
//
// A store bound to a transaction (TxBound) is never extended: the
// transaction protects the reservation, and a transaction must not be used
// from two goroutines at once.
func KeepAlive(ctx context.Context, s Store, key Key, lease Lease, every time.Duration, lost func()) (stop func()) {
	k := keepAlive(ctx, s, key, lease, every, lost, nil)
	if k == nil {
		return func() {}
	}
	return k.stop
}
