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
	// Defaults to a third of the lease. Negative disables heartbeats. Keep
	// it well below the lease: a longer interval lets the lease lapse
	// between heartbeats, and another Begin may then take the key over.
	HeartbeatEvery time.Duration
	// SettleTimeout bounds the Commit or Fail call after fn returns (with
	// the repeats of a Commit or FailPermanent the store answered
	// ErrUnavailable), and separately the release (FailTransient) that
	// follows a Commit or FailPermanent that failed. These calls run even when ctx is
	// cancelled, so that finished work is recorded. Zero or negative means
	// the default, 10 seconds.
	SettleTimeout time.Duration
}

// ErrLeaseLost is the cause of the cancellation of fn's context when Do's
// heartbeat finds that the key was taken over, or when no heartbeat has
// succeeded for as long as the lease lasts (context.Cause reports it).
var ErrLeaseLost = errors.New("idem: lease lost while running")

// Do runs fn for a key until one run succeeds or fails permanently, one
// run at a time, and replays that outcome to every later call with the
// same key and request: fn's effects happen once as long as a run that
// fails leaves none behind (a run cut off by a crash or a lost lease may
// have done part of its work before the next one runs). Begin's outcome
// decides:
//
//   - Fresh (no record, or a reservation whose lease lapsed, taken over):
//     fn runs, and its result is committed and returned;
//   - PriorResult: the recorded result, decoded into Res; fn does not run.
//     A recorded result that no longer decodes into Res gives a
//     *DecodeError (errors.Is(err, ErrIncompatibleState));
//   - PriorError: the recorded permanent failure, as a *StoredError; fn
//     does not run;
//   - InFlight: an *InFlightError (ErrInFlight) whose RetryAfter says when
//     to try again; fn does not run;
//   - Mismatch: a *MismatchError (ErrMismatch) carrying the recorded
//     request; fn does not run.
//
// What fn does decides how the key is settled:
//
//   - returns nil: the result is committed, and returned;
//   - returns an error marked with Permanent: the error is recorded
//     (FailPermanent) and returned as is now, and as a *StoredError to
//     every retry;
//   - returns another error: the key is released (FailTransient), so a
//     retry runs fn again, and fn's result and error are returned as they
//     are;
//   - panics: the key is released and the panic goes on with the same
//     value; so it is when fn ends its goroutine (runtime.Goexit).
//
// Cancellation of ctx:
//
//   - done before Do starts, or by the time Begin returns Fresh: Do returns
//     ctx.Err(), fn does not run and no reservation is left (a Fresh one is
//     released);
//   - while fn runs: fn's context, derived from ctx, is done too. What fn
//     returns is settled as above all the same: a result fn returns in
//     spite of the cancellation is committed;
//   - the settle call after fn (Commit, FailPermanent or FailTransient)
//     runs with ctx's values but without its cancellation, bounded by
//     DoOpts.SettleTimeout, so that finished work is recorded.
//
// Store failures:
//
//   - Begin fails (say errors.Is(err, ErrUnavailable)): its error; fn does
//     not run;
//   - a Commit or FailPermanent that fails with ErrUnavailable (a
//     connection dropped, a failover) is made again under the same lease,
//     as CommitRetrying does, until it records the outcome or
//     DoOpts.SettleTimeout ends;
//   - the result or the permanent failure cannot be recorded (a store
//     still unavailable, a result that does not encode, ErrInvalidPayload,
//     or is too large, ErrPayloadTooLarge): Do returns fn's result with an
//     error wrapping ErrNotRecorded and the store's (joined to fn's error,
//     if any) and releases the key: the effect happened, but a retry runs
//     fn again.
//     The release is safe even when the store failed after applying the
//     write (a lost reply, a context that ended while it wrote; see
//     Store): a store rejects the release of a settled reservation with
//     ErrStaleToken, changing nothing, so what was recorded stays, and
//     a retry replays it;
//   - the release after an error of fn fails: fn's error joined to the
//     release's. The key then stays in flight until its lease lapses;
//   - a heartbeat panics (the store's Heartbeat, called from a goroutine
//     of Do's own, where a panic would crash the process): the panic is
//     recovered and counts as a lost lease. fn's context is cancelled with
//     a cause wrapping both ErrLeaseLost and a *PanicError that carries the
//     panic's value and stack; once fn returns, nothing is recorded,
//     whatever fn returned, the key is released, and Do returns fn's result
//     with an error wrapping that cause (joined to fn's error, if any). A
//     panic in the other store calls happens on the caller's goroutine, and
//     goes on as it is once the key is released; so does a store call that
//     ends the goroutine (runtime.Goexit, as t.FailNow in a fake store).
//
// While fn runs, Do extends the lease every DoOpts.HeartbeatEvery, also
// after ctx is cancelled (fn may still return a result to commit). When a
// heartbeat finds that the key was taken over, or no heartbeat has
// succeeded (an unreachable or hanging store) for as long as the lease
// lasts, so that it has lapsed and may be taken over, fn's context is
// cancelled with cause ErrLeaseLost (see context.Cause), and nothing fn
// returns is recorded over a new owner's record: once another Begin has
// taken the key over, the settle call fails and Do returns fn's result
// with an error satisfying errors.Is(err, ErrStaleToken). When nobody has
// (the store was only unreachable for a while), what fn returns is
// settled as above. An error fn returns after its context was cancelled
// so is returned wrapped with ErrLeaseLost too (fn's context.Canceled, say,
// satisfies both errors.Is(err, context.Canceled) and errors.Is(err,
// ErrLeaseLost)), which tells a lost lease from the caller's own
// cancellation. With heartbeats disabled, a run outliving its lease is
// not told, and only its settle call fails so.
//
// Invalid arguments fail before anything runs: a nil ctx, a nil s (or a
// nil pointer of a store type, as a constructor returns with its error) or
// a nil fn with ErrInvalidArgument, a req that does not encode with ErrInvalidPayload,
// an invalid key or options with the store's errors (ErrInvalidKey,
// ErrInvalidOptions).
//
// Requests are compared by the canonical form of their JSON
// (FingerprintJSON's: RFC 8785's, numbers by their exact value, so int64
// IDs beyond 2^53 that differ only in their last digits are different
// requests), and strings as encoding/json writes them (invalid UTF-8
// becomes U+FFFD: keep bytes in a []byte field, which is encoded as
// base64).
func Do[Req, Res any](ctx context.Context, s Store, key Key, req Req, fn func(ctx context.Context) (Res, error), opts *DoOpts) (Res, error) {
	var zero Res
	switch {
	case ctx == nil:
		return zero, fmt.Errorf("%w: Do with a nil context", ErrInvalidArgument)
	case IsNilStore(s):
		return zero, fmt.Errorf("%w: Do without a Store (a nil %T: was its constructor's error ignored?)", ErrInvalidArgument, s)
	case fn == nil:
		return zero, fmt.Errorf("%w: Do without a function to run", ErrInvalidArgument)
	}
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	if opts == nil {
		opts = &DoOpts{}
	}
	t := NewTyped[Req, Res](s, opts.Typed)
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
	if err := ctx.Err(); err != nil {
		// Cancelled while Begin ran: do not start fn, and leave no
		// reservation behind.
		sctx, scancel := settleContext(ctx, opts)
		defer scancel()
		return zero, withRelease(err, t.FailTransient(sctx, key, o.Lease))
	}
	return runFresh(ctx, t, key, o.Lease, fn, opts)
}

// settleContext returns the context of a settle call of Do: ctx's values
// without its cancellation, bounded by opts.SettleTimeout.
func settleContext(ctx context.Context, opts *DoOpts) (context.Context, context.CancelFunc) {
	d := opts.SettleTimeout
	if d <= 0 {
		d = 10 * time.Second
	}
	return context.WithTimeout(context.WithoutCancel(ctx), d)
}

func runFresh[Req, Res any](ctx context.Context, t *Typed[Req, Res], key Key, lease Lease, fn func(ctx context.Context) (Res, error), opts *DoOpts) (res Res, err error) {
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// The heartbeats go on after ctx is cancelled, until fn returns: what
	// fn returns then is still committed, so the key must stay its own
	// while it runs, or a retry would take it over and run fn again.
	k := keepAlivePooled(context.WithoutCancel(ctx), t.store, key, lease, opts.HeartbeatEvery, cancelFunc(cancel))
	settled := false
	defer func() {
		// A panic, or fn or a settle call that never returned
		// (runtime.Goexit): the key is released. After a settle call that
		// recorded the outcome the release changes nothing (the store
		// rejects it with ErrStaleToken).
		p := recover()
		if p == nil && settled {
			return
		}
		k.stop()
		sctx, scancel := settleContext(ctx, opts)
		_ = t.FailTransient(sctx, key, lease)
		scancel()
		if p != nil {
			panic(p)
		}
	}()
	res, err = fn(runCtx)
	// fn most likely failed because runCtx was cancelled when the lease
	// was lost: say why, as a bare context.Canceled reads like the
	// caller's own cancellation. What is recorded is fn's error as it is.
	lost := err != nil && ctx.Err() == nil && errors.Is(context.Cause(runCtx), ErrLeaseLost) && !errors.Is(err, ErrLeaseLost)
	pe := k.stop()
	k = nil // a pooled keeper may serve another run now: a panic below must not stop it
	err = settleFresh(ctx, t, key, lease, res, err, pe, opts)
	settled = true
	if lost {
		err = fmt.Errorf("%w (%w)", err, ErrLeaseLost)
	}
	return res, err
}

// settleFresh settles the reservation held by lease after fn returned res
// and err, with pe the panic of a heartbeat, if any, and returns the error
// Do returns (see Do).
func settleFresh[Req, Res any](ctx context.Context, t *Typed[Req, Res], key Key, lease Lease, res Res, err error, pe *PanicError, opts *DoOpts) error {
	sctx, scancel := settleContext(ctx, opts)
	defer scancel()
	if pe != nil {
		// The store panicked in a heartbeat: record nothing.
		return errors.Join(err, withRelease(nothingRecorded(pe), t.FailTransient(sctx, key, lease)))
	}
	// release frees the key after a settle call that recorded nothing, so
	// that a retry runs fn again instead of waiting out the lease. It is a
	// settle call of its own, with its own time: the one that failed may
	// have failed because its time ran out.
	release := func() {
		rctx, rcancel := settleContext(ctx, opts)
		defer rcancel()
		_ = t.FailTransient(rctx, key, lease)
	}
	if err != nil {
		if !IsPermanent(err) {
			if serr := t.FailTransient(sctx, key, lease); serr != nil {
				return errors.Join(err, fmt.Errorf("idem: recording the failure: %w", serr))
			}
			return err
		}
		se := ErrorOf(err)
		if serr := recordOutcome(sctx, t.store, key, lease, func(ctx context.Context) error { return t.store.FailPermanent(ctx, key, lease, se) }, failedWith(se), nil); serr != nil {
			if !errors.Is(serr, ErrStaleToken) {
				release() // not recorded, and the key not another owner's
			}
			return errors.Join(err, &notRecordedError{"recording the failure", serr})
		}
		return err
	}
	b, cerr := t.encode("result", res)
	if cerr == nil {
		cerr = CommitRetrying(sctx, t.store, key, lease, b)
	}
	if cerr != nil {
		if !errors.Is(cerr, ErrStaleToken) {
			// Not recorded (say, a result that does not encode or is too
			// large, or a store that did not answer in time), and the key
			// not another owner's.
			release()
		}
		return &notRecordedError{"result not recorded", cerr}
	}
	return nil
}

// KeepAlive extends lease in the background every interval (a third of
// lease.TTL when every is 0) until the returned stop function is called;
// stop cancels a heartbeat under way (the work has ended: its answer
// changes nothing) and waits for the background goroutine to exit. It
// also stops once ctx is done, cancelling a heartbeat under way, and then
// does not call lost: the lease lapses in its time. Give it a context
// that lasts as long as the work (context.WithoutCancel of a request's,
// say). When the store reports that the lease is no longer held
// (ErrStaleToken, or an error wrapping ErrLeaseLost), KeepAlive calls lost
// once and stops extending. lost runs on the heartbeat, which stop waits for: it
// must not call stop itself (signal the work instead, and stop from there).
// Other heartbeat errors (an unavailable store) are retried at the next
// tick; once no heartbeat has succeeded for the lease's TTL (counted from
// when the last successful one was sent; before the first success, from
// the start, or until the lease's ExpiresAt when that is earlier, as for a
// lease granted some time before KeepAlive starts), the lease has lapsed
// and may have been taken over, so KeepAlive calls lost then too.
// Each heartbeat is bounded by that moment, so a store that hangs rather
// than fails is given up on in time (stores honour their context). A
// negative every, or a lease without TTL and no explicit every, disables
// it.
//
// A store bound to a transaction (TxBound) is never extended: the
// transaction protects the reservation, and a transaction must not be used
// from two goroutines at once.
//
// A nil ctx, a nil s or nil pointer of a store type (see IsNilStore), the
// zero key or a lease without a token (not a Fresh outcome's) cannot keep
// any lease: KeepAlive then calls lost (when not nil) before it returns,
// sends no heartbeat, and returns a stop that does nothing. A nil lost is
// allowed: the loss is then not reported.
//
// Panics: the heartbeats run on a goroutine of their own, where a panic
// would crash the process, so a panic there is recovered. A Heartbeat of s
// that panics counts as a lost lease: lost is called and the keeping
// stops; so it does when lost panics. stop then raises the first such
// panic again, on the caller's goroutine where it can be recovered, as a
// *PanicError carrying the panic's value and stack; a later stop does not.
// A Heartbeat or a lost that ends its goroutine (runtime.Goexit, as
// t.FailNow does) instead of returning is reported so too.
// Do and Owner.Run report a Heartbeat's panic as an error instead.
func KeepAlive(ctx context.Context, s Store, key Key, lease Lease, every time.Duration, lost func()) (stop func()) {
	if ctx == nil || IsNilStore(s) || key.IsZero() || lease.Token == "" {
		if lost != nil {
			lost()
		}
		return func() {}
	}
	k := keepAlive(ctx, s, key, lease, every, lost, nil)
	if k == nil {
		return func() {}
	}
	return func() {
		if pe := k.stop(); pe != nil {
			panic(pe)
		}
	}
}
