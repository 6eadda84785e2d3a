package idem

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"
)

// canceler is what a keeper cancels with cause ErrLeaseLost when the lease
// is lost: a run's context.
type canceler interface{ cancelCause(cause error) }

// cancelFunc is a context.CancelCauseFunc as a canceler.
type cancelFunc context.CancelCauseFunc

func (f cancelFunc) cancelCause(cause error) { f(cause) }

// keepAlive is KeepAlive returning its keeper (nil when it does not keep),
// for callers that stop it without a func value. When the lease is lost it
// calls lost, or else cancels cancel with cause ErrLeaseLost.
func keepAlive(ctx context.Context, s Store, key Key, lease Lease, every time.Duration, lost func(), cancel canceler) *keeper {
	k := new(keeper)
	if !k.start(ctx, s, key, lease, every, lost, cancel) {
		return nil
	}
	return k
}

// keepAlivePooled is keepAlive with a keeper, and its timer, taken from a
// pool and given back by stop: a run shorter than the heartbeat interval,
// the common case, then allocates nothing and, most of the time, does not
// touch the timer either (see keeper.start). The caller must call stop
// exactly once and never use the keeper after.
func keepAlivePooled(ctx context.Context, s Store, key Key, lease Lease, every time.Duration, cancel canceler) *keeper {
	k := keeperPool.Get().(*keeper)
	if !k.start(ctx, s, key, lease, every, nil, cancel) {
		keeperPool.Put(k)
		return nil
	}
	k.pooled = true
	return k
}

var keeperPool = sync.Pool{New: func() any { return new(keeper) }}

// keeper extends a lease from a timer, so that a short run costs no
// goroutine and no ticker: nothing happens unless the timer fires.
//
// A pooled keeper goes back to the pool with its timer still armed, and a
// later run on it keeps that timer when it is due no later than the run
// needs its first beat: arming and stopping a timer for every run costs
// more than the rest of the keeping. A beat that fires while the keeper is
// idle does nothing and leaves it unarmed; one that fires during a later
// run extends that run's lease, read under mu, a little early. No beat
// reaches a run that has ended: stop waits for a beat under way, and beat
// reads the run it extends under mu.
type keeper struct {
	ctx    context.Context
	s      Store
	key    Key
	every  time.Duration
	lost   func()   // called when the lease is lost, or else
	cancel canceler // cancelled with cause ErrLeaseLost
	pooled bool     // stop gives k back to keeperPool

	mu      sync.Mutex
	timer   *time.Timer   // kept across uses of a pooled keeper
	armed   bool          // timer is pending, or fired and its beat not yet run
	armedAt time.Duration // the interval timer was armed with
	armedOn time.Time     // when timer was armed, on the monotonic clock
	lease   Lease
	beating bool
	stopped bool
	// deadline is when the lease held may lapse, on this process's
	// monotonic clock: a heartbeat's TTL after it was sent, for the last
	// one that succeeded. Zero until the run's first beat, which works it
	// out from when its timer was armed (see beat), so that a run shorter
	// than a beat reads the clock only to arm a timer, not for an armed
	// one it inherits. Only a lease with a TTL has one.
	deadline time.Time
	// failing says the last heartbeat failed (other than with
	// ErrStaleToken): once the deadline passes with no success since, the
	// lease has lapsed.
	failing bool
	idle    chan struct{} // made by a stop waiting for a beat, closed when the beat ends
	// endBeat cancels the heartbeat under way: stop calls it, as the run
	// it would extend has ended.
	endBeat context.CancelFunc
	// panicked is the first panic a beat recovered, in the store's
	// Heartbeat or in lost, for stop to return.
	panicked *PanicError
}

// start makes k, new or from the pool, keep lease, as keepAlive
// describes, and reports whether it does: not for a store bound to a
// transaction, a negative every, or a lease without TTL and no every.
func (k *keeper) start(ctx context.Context, s Store, key Key, lease Lease, every time.Duration, lost func(), cancel canceler) bool {
	if tb, ok := s.(TxBound); ok && tb.TxBound() {
		return false
	}
	if every < 0 || lease.TTL <= 0 && every == 0 {
		return false
	}
	if every == 0 {
		every = lease.TTL / 3
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.ctx, k.s, k.key, k.lease, k.every, k.lost, k.cancel = ctx, s, key, lease, every, lost, cancel
	k.beating, k.stopped, k.idle, k.deadline, k.failing, k.panicked = false, false, nil, time.Time{}, false, nil
	switch {
	case k.timer == nil:
		k.timer = time.AfterFunc(every, k.beat)
	case k.armed && k.armedAt <= every:
		// Armed by an earlier run with an interval no longer than this
		// one's, so due before this run needs its first beat.
		return true
	default:
		// When the timer has just fired, its beat, not yet run, serves
		// this run too, and the timer armed again here may fire while
		// that beat is under way: beat then leaves the keeping to it.
		k.timer.Reset(every)
	}
	k.armed, k.armedAt, k.armedOn = true, every, time.Now()
	return true
}

func (k *keeper) beat() {
	k.mu.Lock()
	if k.beating {
		// Another beat is under way, and re-arms the timer when it ends:
		// a pooled timer that fired as start armed it again (see start).
		// Beats never overlap, so that stop, waiting for the one under
		// way, leaves none behind.
		k.mu.Unlock()
		return
	}
	if k.stopped || k.ctx.Err() != nil {
		k.armed = false
		k.mu.Unlock()
		return
	}
	k.beating = true
	lease, every, failing := k.lease, k.every, k.failing
	now := time.Now()
	if lease.TTL > 0 && k.deadline.IsZero() {
		// The run's first beat. Its timer was armed at armedOn: by start,
		// when the run began, some time after Begin granted the lease, or
		// by an earlier run for a pooled timer, before this run began. The
		// deadline is the earlier of a TTL after that and the lease's
		// ExpiresAt, as Begin granted it: a run started late after Begin
		// is not told later than the lease lapsed. Either is about when
		// the lease lapses, or earlier, which is the safe side (giving up
		// sooner while the store is unreachable): ExpiresAt is read on the
		// store's clock, and one behind this process's makes it early,
		// while one ahead is capped by the TTL. The deadline does not
		// depend on when the timer fired: a beat that runs late, even
		// after the lease lapsed, must not push the lapse back by its
		// lateness.
		k.deadline = k.armedOn.Add(lease.TTL)
		if !lease.ExpiresAt.IsZero() {
			if end := now.Add(lease.ExpiresAt.Sub(now)); end.Before(k.deadline) {
				k.deadline = end
			}
		}
	}
	deadline := k.deadline
	ctx, endBeat := context.WithCancel(k.ctx)
	k.endBeat = endBeat
	k.mu.Unlock()

	// stage is where the beat is, for a Heartbeat or a lost that ends the
	// goroutine instead of returning (see goexited).
	stage := inHeartbeat
	var pe *PanicError
	defer func() {
		if stage != beatReturned {
			k.goexited(stage, pe)
		}
	}()
	l, lost, err := k.heartbeat(ctx, lease, every, failing, now, deadline)
	endBeat()
	pe, _ = err.(*PanicError)
	if lost {
		stage = inLost
		if lpe := k.report(pe); pe == nil {
			pe = lpe
		}
	}
	stage = beatReturned

	k.mu.Lock()
	defer k.mu.Unlock()
	k.beating, k.endBeat = false, nil
	if k.panicked == nil {
		k.panicked = pe
	}
	k.failing = err != nil
	if k.idle != nil {
		close(k.idle)
		k.idle = nil
	}
	next := k.every
	if err == nil {
		k.lease = l
		if ttl := l.TTL; ttl > 0 {
			k.deadline = now.Add(ttl) // now is when it was sent, or a little before
		}
	} else if lease.TTL > 0 {
		// Try again by the deadline, to tell the run then if it lapsed.
		next = min(next, max(time.Until(deadline), 0))
	}
	if !lost && !k.stopped {
		k.timer.Reset(next)
		k.armed, k.armedAt, k.armedOn = true, next, time.Now()
	} else {
		k.armed = false
	}
}

// beatStage is where a beat is: in the store's Heartbeat, in lost, or
// returned from both.
type beatStage uint8

const (
	inHeartbeat beatStage = iota
	inLost
	beatReturned
)

// goexited ends a beat whose goroutine ended (runtime.Goexit, as t.FailNow
// does) instead of returning, in stage, so that stop, waiting for the beat
// to end, does not wait for ever. In the store's Heartbeat: as for a
// Heartbeat that panics, the lease counts as lost and the run is told. In
// lost, which was told already: as for a lost that panics, unless
// heartbeatPanic, the Heartbeat's panic that made the beat call lost, comes
// first.
func (k *keeper) goexited(stage beatStage, heartbeatPanic *PanicError) {
	var pe *PanicError
	switch {
	case stage == inHeartbeat:
		pe = &PanicError{Op: "Store.Heartbeat", Value: errGoexit, Stack: debug.Stack()}
		// Deferred, the beat ends even when lost, told now, ends the
		// goroutine again; a panic of lost meanwhile is second to the
		// Heartbeat's end.
		defer k.endGoexited(pe)
		_ = k.report(pe)
		return
	case heartbeatPanic != nil:
		pe = heartbeatPanic
	default:
		pe = &PanicError{Op: "KeepAlive's lost", Value: errGoexit, Stack: debug.Stack()}
	}
	k.endGoexited(pe)
}

// endGoexited ends, for goexited, a beat whose goroutine ended, with pe
// its *PanicError unless one came first.
func (k *keeper) endGoexited(pe *PanicError) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.endBeat != nil {
		k.endBeat()
	}
	k.beating, k.endBeat, k.failing, k.armed = false, nil, true, false
	if k.panicked == nil {
		k.panicked = pe
	}
	if k.idle != nil {
		close(k.idle)
		k.idle = nil
	}
}

// errGoexit is the Value of the *PanicError of a Heartbeat, or a lost,
// that ended its goroutine.
var errGoexit = errors.New("it ended its goroutine (runtime.Goexit)")

// heartbeat extends lease, sent at now within ctx (k.ctx, ended by stop
// too), and reports whether the lease is
// lost: taken over (ErrStaleToken, or ErrLeaseLost from a store that says
// so in those words), or lapsed, when deadline passed with
// no heartbeat succeeding since one was sent. failing says the last
// heartbeat failed. The call itself is bounded by the deadline, so that a
// store that hangs rather than fails (a network partition) is noticed
// when the lease lapses, not when the connection gives up; a beat that
// runs after the deadline without a failure before (a late timer, an
// interval longer than the lease) still gets one more try, bounded by
// every: a success says nobody took the key over. A Heartbeat that panics
// loses the lease too, with the panic as a *PanicError for error.
func (k *keeper) heartbeat(ctx context.Context, lease Lease, every time.Duration, failing bool, now, deadline time.Time) (Lease, bool, error) {
	parent, cancel := ctx, context.CancelFunc(nil)
	if lease.TTL > 0 {
		bound := deadline
		if !now.Before(deadline) {
			if failing {
				return Lease{}, true, errLapsed
			}
			bound = now.Add(every)
		}
		ctx, cancel = context.WithDeadline(ctx, bound)
	}
	l, err := k.call(ctx, lease)
	if cancel != nil {
		cancel()
	}
	if _, ok := err.(*PanicError); ok {
		// The store is broken: whether the lease is still held cannot be
		// told, so the run must stop as if it were lost.
		return Lease{}, true, err
	}
	switch {
	case err == nil:
		return l, false, nil
	case errors.Is(err, ErrStaleToken), errors.Is(err, ErrLeaseLost):
		return l, true, err
	}
	// The store could not be reached. Once the deadline has passed the
	// lease granted by the last success has lapsed and another owner may
	// run: the run must be told, as if the store had said so.
	return l, lease.TTL > 0 && !time.Now().Before(deadline) && parent.Err() == nil, err
}

// call sends the heartbeat, returning a panic in the store's Heartbeat as a
// *PanicError: it runs on a timer's goroutine, where a panic would crash
// the process.
func (k *keeper) call(ctx context.Context, lease Lease) (l Lease, err error) {
	defer func() {
		if p := recover(); p != nil {
			l, err = Lease{}, &PanicError{Op: "Store.Heartbeat", Value: p, Stack: debug.Stack()}
		}
	}()
	return k.s.Heartbeat(ctx, k.key, lease, lease.TTL)
}

// report tells the run that its lease is lost: it calls lost, or else
// cancels cancel with cause ErrLeaseLost, wrapped around pe, the panic of
// the store's Heartbeat, if any. It returns a panic in lost as a
// *PanicError.
func (k *keeper) report(pe *PanicError) (lostPanic *PanicError) {
	switch {
	case k.lost != nil:
		defer func() {
			if p := recover(); p != nil {
				lostPanic = &PanicError{Op: "KeepAlive's lost", Value: p, Stack: debug.Stack()}
			}
		}()
		k.lost()
	case k.cancel != nil:
		k.cancel.cancelCause(leaseLostTo(pe))
	}
	return nil
}

// leaseLostTo returns the cause of a run's cancellation when its lease is
// lost: ErrLeaseLost, wrapped around pe when a Heartbeat panicked.
func leaseLostTo(pe *PanicError) error {
	if pe == nil {
		return ErrLeaseLost
	}
	return fmt.Errorf("%w: %w", ErrLeaseLost, pe)
}

// nothingRecorded is the error of a run whose store panicked in a
// heartbeat (pe): whether the lease is still held cannot be told, and the
// store is broken, so nothing is recorded.
func nothingRecorded(pe *PanicError) error {
	return &notRecordedError{"nothing recorded", leaseLostTo(pe)}
}

// withRelease is err, joined to the error of the release of the key that
// followed it when that release failed (releaseErr not nil).
func withRelease(err, releaseErr error) error {
	if releaseErr == nil {
		return err
	}
	return errors.Join(err, fmt.Errorf("idem: releasing the key: %w", releaseErr))
}

// errLapsed is the failure of a beat that found the lease lapsed before
// it tried the store.
var errLapsed = errors.New("idem: lease lapsed without a heartbeat")

// stop ends the keeping, cancels a heartbeat under way and waits for it
// to end, so that a store that hangs holds the run's settle call up for
// no time (and a beat that ends so reports no loss). A nil k
// has nothing to stop. A pooled keeper goes back to the pool, its timer
// left as it is for the next run (see keeper); another keeper's timer is
// stopped.
//
// It returns the first panic a beat recovered (in the store's Heartbeat,
// or in lost), once: a later stop returns nil.
func (k *keeper) stop() *PanicError {
	if k == nil {
		return nil
	}
	k.mu.Lock()
	k.stopped = true
	pooled := k.pooled
	if !pooled && k.timer.Stop() {
		k.armed = false
	}
	if k.beating && k.endBeat != nil {
		k.endBeat() // the run has ended: its answer changes nothing
	}
	for k.beating {
		if k.idle == nil {
			k.idle = make(chan struct{})
		}
		idle := k.idle
		k.mu.Unlock()
		<-idle
		k.mu.Lock()
	}
	pe := k.panicked
	k.panicked = nil
	if pooled {
		k.ctx, k.s, k.key, k.lost, k.cancel, k.lease, k.pooled = nil, nil, Key{}, nil, nil, Lease{}, false
	}
	k.mu.Unlock()
	if pooled {
		keeperPool.Put(k)
	}
	return pe
}
