package idem

import (
	"context"
	"errors"
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
	lease   Lease
	beating bool
	stopped bool
	// failures counts the heartbeats failed in a row (other than with
	// ErrStaleToken): when they span a whole lease, it has lapsed.
	failures int
	idle     chan struct{} // made by a stop waiting for a beat, closed when the beat ends
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
	k.beating, k.stopped, k.idle, k.failures = false, false, nil, 0
	switch {
	case k.timer == nil:
		k.timer = time.AfterFunc(every, k.beat)
	case k.armed && k.armedAt <= every:
		// Armed by an earlier run with an interval no longer than this
		// one's, so due before this run needs its first beat.
		return true
	default:
		k.timer.Reset(every)
	}
	k.armed, k.armedAt = true, every
	return true
}

func (k *keeper) beat() {
	k.mu.Lock()
	if k.stopped || k.ctx.Err() != nil {
		k.armed = false
		k.mu.Unlock()
		return
	}
	k.beating = true
	lease, every, failures := k.lease, k.every, k.failures
	k.mu.Unlock()

	l, err := k.s.Heartbeat(k.ctx, k.key, lease, lease.TTL)
	lost := errors.Is(err, ErrStaleToken)
	switch {
	case err == nil:
		failures = 0
	case !lost:
		// The store could not be reached. Beats are never early, so once
		// the failed ones span the lease's TTL, the lease granted before
		// the last success has lapsed and another owner may run: the run
		// must be told, as if the store had said so.
		failures++
		lost = lease.TTL > 0 && time.Duration(failures)*every >= lease.TTL && k.ctx.Err() == nil
	}
	if lost {
		switch {
		case k.lost != nil:
			k.lost()
		case k.cancel != nil:
			k.cancel.cancelCause(ErrLeaseLost)
		}
	}

	k.mu.Lock()
	defer k.mu.Unlock()
	k.beating = false
	k.failures = failures
	if k.idle != nil {
		close(k.idle)
		k.idle = nil
	}
	if err == nil {
		k.lease = l
	}
	if !lost && !k.stopped {
		k.timer.Reset(k.every)
		k.armed, k.armedAt = true, k.every
	} else {
		k.armed = false
	}
}

// stop ends the keeping and waits for a heartbeat under way. A nil k
// has nothing to stop. A pooled keeper goes back to the pool, its timer
// left as it is for the next run (see keeper); another keeper's timer is
// stopped.
func (k *keeper) stop() {
	if k == nil {
		return
	}
	k.mu.Lock()
	k.stopped = true
	pooled := k.pooled
	if !pooled && k.timer.Stop() {
		k.armed = false
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
	if pooled {
		k.ctx, k.s, k.key, k.lost, k.cancel, k.lease, k.pooled = nil, nil, Key{}, nil, nil, Lease{}, false
	}
	k.mu.Unlock()
	if pooled {
		keeperPool.Put(k)
	}
}
