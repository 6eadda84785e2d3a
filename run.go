package idem

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Owner runs a handler as the owner of a Fresh reservation and settles the
// reservation after it: the part of serving a request that does not depend
// on the transport. The HTTP middleware and the gRPC interceptor keep one
// per request. Do does the same for typed functions, with their own
// encoding and permanent failures.
//
// Set Store, Key and Lease (and the options) and call Run once. Run fills
// in the results as it goes, so that they are complete even when the
// handler panics.
type Owner struct {
	Store Store
	Key   Key
	// Lease is the Fresh reservation, as Begin returned it.
	Lease Lease
	// SettleTimeout, when positive, bounds each settle call: the Commit
	// (with its repeats, see Run), or the FailTransient that releases the
	// key. When it is not, see Run.
	SettleTimeout time.Duration
	// Timed makes Run measure SettleTime.
	Timed bool
	// OnCommitRetry, when set, is called once, on Run's goroutine, before
	// a Commit that failed with ErrUnavailable is made again (see Run):
	// what work returned is not recorded yet, and may take a while to be.
	// A caller holding work's answer back until it is recorded may deliver
	// it then; idemhttp sends the response to the client.
	OnCommitRetry func()

	// Recorded reports that the result was committed.
	Recorded bool
	// Err is the error of the settle call that failed: the Commit's, or
	// else the FailTransient's; or, when a Heartbeat panicked, an error
	// wrapping ErrLeaseLost and a *PanicError; or ctx's error, when Run
	// was called with a ctx already done (see Run). When Run is called
	// without a Store (nil, or a nil pointer of a store type), a Key, a
	// Lease (its Token), work or a context, Err is ErrInvalidArgument: work
	// did not run and nothing was sent to the store.
	Err error
	// SettleTime is the time spent in settle calls, when Timed.
	SettleTime time.Duration
}

// Run calls work as the owner of the reservation and settles it:
//
//   - while work runs, the lease is extended in the background (KeepAlive),
//     and work's context, derived from ctx, is cancelled with cause
//     ErrLeaseLost when the key is taken over, or when no heartbeat has
//     succeeded (an unreachable or hanging store) for as long as the lease
//     lasts;
//   - work returns the result to commit and record=true, or record=false
//     to release the key (FailTransient), so that a retry runs again;
//   - a panic in work releases the key, and Run panics again with the
//     same value; work that ends its goroutine (runtime.Goexit) releases
//     it too;
//   - a Commit that fails releases the key too, unless it failed with
//     ErrStaleToken (the key has another owner now). A Commit that was
//     applied all the same (a lost reply) keeps its result: the store
//     rejects the release of a settled reservation with ErrStaleToken;
//   - a Heartbeat of the store that panics (it runs on a goroutine of its
//     own, where a panic would crash the process) is recovered and counts
//     as a lost lease: work's context is cancelled with a cause wrapping
//     both ErrLeaseLost and a *PanicError carrying the panic's value and
//     stack, and once work returns nothing is recorded, whatever it
//     returned: the key is released and Err wraps that cause. A panic in
//     Commit or FailTransient happens on Run's goroutine and goes on as it
//     is (after a Commit's, the key is released); so does a Commit that
//     ends the goroutine (runtime.Goexit, as t.FailNow in a fake store).
//
// The heartbeats and the settle calls run with ctx's values but not its
// cancellation: work may go on after ctx is cancelled (work's context is
// cancelled with it) and what it returns is settled all the same, so the
// key neither lapses under work still running nor stays in flight once it
// has returned. A Commit the store answers ErrUnavailable (a connection
// dropped, a failover) is made again under the same lease, as
// CommitRetrying does: work's effect has happened, and a key released
// would let a retry run it again. The settle calls are bounded by
// SettleTimeout; when it is not set, by 10 seconds for a ctx that can be
// cancelled, and not at all for one that cannot (a Commit's repeats then
// stop 10 seconds after the first). Pass a context that cannot be cancelled
// (context.WithoutCancel of a request's): work's context then costs
// nothing until work watches it (Done, or a context derived from it), so a
// short handler that never looks pays for no cancellation machinery.
//
// A ctx that is done already when Run is called does not start work, as
// Do and the consumer do not: Run releases the key (FailTransient), so that
// a retry runs the work, and sets Err to ctx.Err() (joined to the
// release's error, if it fails). Only a cancellation that comes while work
// runs is detached from, as above.
//
// Run never runs work outside a reservation: an Owner without a Store, Key
// or Lease, a nil work or a nil ctx sets Err to ErrInvalidArgument and
// returns without calling work.
func (o *Owner) Run(ctx context.Context, work func(ctx context.Context) (result []byte, record bool)) {
	if ctx == nil || IsNilStore(o.Store) || o.Key.IsZero() || o.Lease.Token == "" || work == nil {
		o.Err = o.invalid(ctx == nil, work == nil)
		return
	}
	if err := ctx.Err(); err != nil {
		// Nobody waits for what work would do: do not start it, and
		// leave no reservation behind.
		o.release(ctx)
		o.Err = withRelease(err, o.Err)
		return
	}
	runCtx := newRunContext(ctx)
	defer runCtx.end()
	kctx := ctx
	if ctx.Done() != nil {
		kctx = context.WithoutCancel(ctx)
	}
	k := keepAlivePooled(kctx, o.Store, o.Key, o.Lease, 0, runCtx)
	settled := false
	defer func() {
		// A panic, or work or a settle call that never returned
		// (runtime.Goexit): the key is released. After a Commit that
		// recorded the result the release changes nothing (the store
		// rejects it with ErrStaleToken).
		p := recover()
		if p == nil && settled {
			return
		}
		k.stop()
		o.release(ctx)
		if p != nil {
			panic(p)
		}
	}()
	result, record := work(runCtx)
	pe := k.stop()
	k = nil // a pooled keeper may serve another run now: a panic below must not stop it
	o.settle(ctx, result, record, pe)
	settled = true
}

// settle settles the reservation after work returned result and record,
// with pe the panic of a heartbeat, if any (see Run).
func (o *Owner) settle(ctx context.Context, result []byte, record bool, pe *PanicError) {
	if pe != nil {
		// The store panicked in a heartbeat: record nothing.
		o.release(ctx)
		o.Err = withRelease(nothingRecorded(pe), o.Err)
		return
	}
	if !record {
		o.release(ctx)
		return
	}
	sctx, scancel, start := o.settleCtx(ctx)
	err := commitRetrying(sctx, o.Store, o.Key, o.Lease, result, o.OnCommitRetry)
	o.settled(scancel, start)
	if err != nil {
		o.Err = err
		if !errors.Is(err, ErrStaleToken) {
			o.release(ctx)
		}
		return
	}
	o.Recorded = true
}

// invalid returns the ErrInvalidArgument of a Run that cannot start.
func (o *Owner) invalid(noCtx, noWork bool) error {
	var what string
	switch {
	case noCtx:
		what = "a nil context"
	case o.Store == nil:
		what = "no Store"
	case IsNilStore(o.Store):
		what = fmt.Sprintf("a nil %T as its Store (was its constructor's error ignored?)", o.Store)
	case o.Key.IsZero():
		what = "the zero Key"
	case o.Lease.Token == "":
		what = "no Lease (set it to the Fresh outcome's)"
	case noWork:
		what = "no work to run"
	}
	return fmt.Errorf("%w: Owner.Run with %s", ErrInvalidArgument, what)
}

// release frees the key so that a retry runs again.
func (o *Owner) release(ctx context.Context) {
	sctx, scancel, start := o.settleCtx(ctx)
	err := o.Store.FailTransient(sctx, o.Key, o.Lease)
	o.settled(scancel, start)
	if err != nil && o.Err == nil {
		o.Err = err
	}
}

// defaultOwnerSettleTimeout bounds a settle call of Run without
// SettleTimeout when its ctx can be cancelled.
const defaultOwnerSettleTimeout = 10 * time.Second

// settleCtx returns the context of a settle call, the function ending it
// (nil when there is none) and the call's start time when timed. The call
// runs without ctx's cancellation (see Run).
func (o *Owner) settleCtx(ctx context.Context) (context.Context, context.CancelFunc, time.Time) {
	var start time.Time
	if o.Timed {
		start = time.Now()
	}
	d := o.SettleTimeout
	if ctx.Done() != nil {
		ctx = context.WithoutCancel(ctx)
		if d <= 0 {
			d = defaultOwnerSettleTimeout
		}
	}
	if d > 0 {
		sctx, cancel := context.WithTimeout(ctx, d)
		return sctx, cancel, start
	}
	return ctx, nil, start
}

// settled ends a settle call and accounts its time.
func (o *Owner) settled(cancel context.CancelFunc, start time.Time) {
	if cancel != nil {
		cancel()
	}
	if o.Timed {
		o.SettleTime += time.Since(start)
	}
}
