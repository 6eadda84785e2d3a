package durable

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// queue is one queue of a running engine: a picker that claims rows into a
// buffer and workers that run them.
type queue struct {
	e           *engine
	name        string
	concurrency int
	prefetch    int
	wakeCh      chan struct{} // a poke for the picker; holds at most one
	// scheduled holds the earliest moment at which a row this engine made
	// (inserted, retried, committed), or one a due hint told of, becomes
	// eligible, since the picker last looked: a moment this engine knows
	// without asking the database.
	// The picker brings its timer forward to it, if that is sooner, and
	// claims nothing until then.
	scheduled *soonest

	// The picker's own: the rate limits its claims apply, whether the
	// queue had rows that name a bucket at the last claim, what the last
	// claim round reported on the buckets and on the earliest row not yet
	// eligible, and when it last reported unknown ones.
	rates     rateLimits
	rated     bool
	waiting   []rateWaiting
	nextDue   time.Duration
	becameDue bool // a row became eligible since the last claim's now(): claim again
	unknownAt time.Time

	mu       sync.Mutex
	cond     *sync.Cond // signalled when buffer grows or stopping is set
	buffer   []*claimed // claimed, not yet running, in pick order
	running  int
	stopping bool
}

func newQueue(e *engine, name string, qc QueueConfig) *queue {
	q := &queue{e: e, name: name, concurrency: qc.Concurrency, prefetch: qc.Prefetch, wakeCh: make(chan struct{}, 1),
		scheduled: newSoonest(), rates: newRateLimits(e.c.cfg.RateLimits)}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// wake pokes the picker without blocking.
func (q *queue) wake() {
	select {
	case q.wakeCh <- struct{}{}:
	default:
	}
}

// soonest is the earliest of the moments noted since its owner last
// took it, with a poke for that owner (a timer it moves to the moment),
// told without blocking.
type soonest struct {
	ch chan struct{} // news for the owner; holds at most one

	mu sync.Mutex
	at time.Time // zero: none
}

func newSoonest() *soonest {
	return &soonest{ch: make(chan struct{}, 1)}
}

// note records at, if it is sooner than the moment recorded, and pokes
// the owner, without blocking.
func (s *soonest) note(at time.Time) {
	s.mu.Lock()
	s.at = earliest(s.at, at)
	s.mu.Unlock()
	select {
	case s.ch <- struct{}{}:
	default:
	}
}

// take returns, and forgets, the moment recorded (zero: none).
func (s *soonest) take() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	at := s.at
	s.at = time.Time{}
	return at
}

// earliest is the earlier of two moments, zero meaning none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// room is how many rows the picker may claim now.
func (q *queue) room() (room, running, buffered int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.concurrency + q.prefetch - q.running - len(q.buffer), q.running, len(q.buffer)
}

// pick is the picker: at once, then on every poke and every PollInterval,
// it claims as many rows as there is room for, repeating while claims come
// back full, until the engine stops. When rows wait for a rate limit's
// tokens it comes back when the tokens are due, if that is sooner; and
// when rows are scheduled for later, when the earliest of them it knows
// of becomes eligible, if that is sooner: one found after a claim that
// came back short (nextDueSQL, or claimNextDueSQL within a rate-limited
// claim), or one this engine made or a due hint told of
// (queue.scheduled). Its one timer
// is moved, never doubled, and stopped with it.
func (q *queue) pick() {
	defer q.e.pickers.Done()
	cfg := &q.e.c.cfg
	t := time.NewTimer(0)
	defer t.Stop()
	// armed is when t fires; due, the earliest moment a row not yet
	// eligible becomes so, as far as the picker knows (zero: none).
	armed, due := time.Now(), time.Time{}
	for {
		claimNow := true
		select {
		case <-q.e.stopping:
			return
		case <-q.wakeCh:
		case <-t.C:
		case <-q.scheduled.ch:
			claimNow = false
		}
		due = earliest(due, q.scheduled.take())
		if !claimNow {
			if !due.IsZero() && due.Before(armed) {
				armed = due
				t.Reset(time.Until(due))
			}
			continue
		}
		next := cfg.PollInterval
		for {
			room, running, buffered := q.room()
			if h := cfg.Hooks.SchedulerSaturation; h != nil {
				h(SaturationEvent{Queue: q.name, InFlight: running, Buffer: buffered, Concurrency: q.concurrency, Prefetch: q.prefetch})
			}
			if room <= 0 || q.stoppingNow() {
				break
			}
			ctx, cancel := q.e.dbContext()
			q.waiting, q.nextDue, q.becameDue = nil, 0, false
			cs, err := q.claimRows(ctx, room)
			cancel()
			if err != nil {
				cfg.Logger.Error("durable: claim failed", slog.String("queue", q.name), slog.Any("error", err))
				break
			}
			if q.nextDue > 0 {
				due = earliest(due, time.Now().Add(q.nextDue))
			}
			if wait := q.reportRateLimits(cs); wait > 0 {
				next = min(next, wait)
			} else {
				next = cfg.PollInterval
			}
			if h := cfg.Hooks.PickStop; h != nil {
				h(PickStopEvent{Queue: q.name, Worker: q.e.owner, Count: len(cs), Demand: room})
			}
			q.push(cs)
			if len(cs) < room && !q.becameDue {
				break
			}
		}
		// A moment past is forgotten: a claim since has taken its rows,
		// or learnt of them again if they were not eligible yet (the
		// database's clock decides), or there was no room, and the
		// worker that makes room pokes the picker.
		now := time.Now()
		if !due.After(now) {
			due = time.Time{}
		} else {
			next = min(next, due.Sub(now))
		}
		armed = now.Add(next)
		t.Reset(next)
	}
}

func (q *queue) stoppingNow() bool {
	select {
	case <-q.e.stopping:
		return true
	default:
		return false
	}
}

// push hands claimed rows to the workers.
func (q *queue) push(cs []*claimed) {
	if len(cs) == 0 {
		return
	}
	q.e.track(cs)
	q.mu.Lock()
	q.buffer = append(q.buffer, cs...)
	q.mu.Unlock()
	q.cond.Broadcast()
}

// work is one worker: it runs buffered rows one at a time until the queue
// stops, finishing the step it is running.
func (q *queue) work() {
	defer q.e.workers.Done()
	for {
		q.mu.Lock()
		for len(q.buffer) == 0 && !q.stopping {
			q.cond.Wait()
		}
		if q.stopping || q.stoppingNow() { // Stop began: drain hands the buffer back
			q.mu.Unlock()
			return
		}
		c := q.buffer[0]
		q.buffer[0] = nil
		q.buffer = q.buffer[1:]
		q.running++
		q.mu.Unlock()

		q.e.runClaim(q, c)

		q.mu.Lock()
		q.running--
		q.mu.Unlock()
		q.wake()
	}
}

// drain stops the queue's workers from taking more rows and hands the
// buffered claims back at once. The picker has stopped by then.
func (q *queue) drain() {
	q.mu.Lock()
	q.stopping = true
	buffered := q.buffer
	q.buffer = nil
	running := q.running
	q.mu.Unlock()
	q.cond.Broadcast()

	released := 0
	if len(buffered) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), q.e.c.cfg.LeaseTTL)
		n, err := release(ctx, q.e.c.pool, q.e.owner, buffered)
		cancel()
		if err != nil {
			q.e.c.cfg.Logger.Error("durable: release of claimed rows failed; their leases will expire",
				slog.String("queue", q.name), slog.Int("count", len(buffered)), slog.Any("error", err))
		}
		released = n
		if err == nil && n < len(buffered) {
			q.e.unlease(buffered...) // some were cancelled, perhaps: their slots are free
		}
		q.e.untrack(buffered...)
		if n > 0 { // for the other engines serving the queue, or where rows of the keys wait
			q.e.wakeFreed(map[string]bool{q.name: true}, keysOf(buffered))
		}
	}
	if h := q.e.c.cfg.Hooks.SchedulerDrain; h != nil {
		h(DrainEvent{Queue: q.name, Released: released, InFlight: running})
	}
}

// runClaim runs the step of one claimed row and commits its outcome. The
// claim is untracked (no longer extended by the heartbeat) as soon as its
// commit, or the hand-back of its row, has returned, before the step is
// logged and reported: the row has moved on, and a beat would take it for
// a lost lease.
func (e *engine) runClaim(q *queue, c *claimed) {
	defer e.untrack(c)
	cfg := &e.c.cfg
	if c.lost.Load() {
		e.unlease(c) // cancelled, perhaps: its slot is free
		return
	}
	e.loadInbox(c)
	ctx, cancel := context.WithCancelCause(e.workCtx)
	if !c.watch(cancel) {
		cancel(errLeaseLapsed)
		e.handBackLapsed(c)
		return
	}
	if c.lost.Load() {
		cancel(ErrLeaseLost)
	}

	// interrupted names what cancelled the step, if the engine's hard
	// stop or the loss or lapse of its lease did (as the step saw it: not
	// after its StepTimeout), so that a failure of the step is handed
	// back.
	interrupted := func() string {
		switch {
		case e.workCtx.Err() != nil:
			return "the engine's stop"
		case errors.Is(context.Cause(ctx), errLeaseLapsed):
			return "the lapse of its lease"
		case errors.Is(context.Cause(ctx), ErrLeaseLost):
			return "the loss of its lease"
		}
		return ""
	}
	var r ranStep
	if def, ok := e.c.defs[fsmKey{c.fsm, c.version}]; ok {
		if t := def.stepTimeout(); t > 0 {
			var tcancel context.CancelFunc
			ctx, tcancel = context.WithTimeout(ctx, t)
			defer tcancel()
			c.setOverdue(t)
		}
		r = def.run(ctx, c, cfg.MaxPayload, interrupted)
		// The step has returned: the heartbeat extends its lease again
		// while the commit waits, should it wait past StepTimeout.
		c.setOverdue(0)
	} else {
		r = unknownFSM(c)
		r.handBack = interrupted()
	}
	c.unwatch()
	cancel(context.Canceled)
	if r.handBack != "" {
		e.handBack(c, r, r.handBack)
		return
	}

	cctx, ccancel := e.commitContext(c)
	res, err := e.commitOutcome(cctx, c, r)
	ccancel()
	if err == nil {
		e.committed(res.ended, res.wake)
	}
	e.untrack(c) // the row has moved on, or its lease is left to expire

	attrs := []any{slog.Int64("id", c.id), slog.String("fsm", c.fsm), slog.String("step", c.step), slog.Int("attempt", c.attempt)}
	switch {
	case err != nil:
		cfg.Logger.Error("durable: outcome commit failed while the lease lasted; the lease will expire and the step run again",
			append(attrs, slog.String("outcome", r.outcome.String()), slog.Any("error", err))...)
	case !res.committed:
		cfg.Logger.Warn("durable: outcome not committed: the lease was lost",
			append(attrs, slog.String("outcome", r.outcome.String()))...)
	case r.err != nil:
		attrs = append(attrs, slog.String("outcome", r.outcome.String()), slog.Any("error", r.err))
		if pe, ok := panicIn(r.err); ok {
			// A panic is a bug: logged as an error, with where it happened.
			cfg.Logger.Error("durable: "+pe.What+" panicked", append(attrs, slog.String("stack", string(pe.Stack)))...)
		} else {
			cfg.Logger.Info("durable: step failed", attrs...)
		}
	}
	if err == nil && !res.committed {
		e.unlease(c) // the step of a cancelled row has ended: its slot is free
	}
	if h := cfg.Hooks.StepStop; h != nil {
		h(StepStopEvent{
			ID: c.id, FSM: c.fsm, Step: c.step, Attempt: c.attempt, Kind: r.outcome.kind,
			Duration: r.duration, Err: r.err, Fenced: err == nil && !res.committed, CommitErr: err,
		})
	}
	if res.runnable {
		q.wake()
	}
	if res.later > 0 {
		q.scheduled.note(time.Now().Add(res.later))
	}
	if res.parkedFor > 0 {
		e.deadlines.note(time.Now().Add(res.parkedFor))
	}
}

// handBackLapsed gives back the row of a claim whose lease may have lapsed
// before its step started (it waited in the buffer while no heartbeat
// could extend it): another engine may have taken the row back and run
// it, so its step does not run here. The row is handed back, runnable
// with its attempt unchanged, if it is still this engine's.
func (e *engine) handBackLapsed(c *claimed) {
	ctx, cancel := e.dbContext()
	n, err := release(ctx, e.c.pool, e.owner, []*claimed{c})
	cancel()
	e.untrack(c)
	attrs := []any{slog.Int64("id", c.id), slog.String("fsm", c.fsm), slog.String("step", c.step), slog.Int("attempt", c.attempt)}
	switch {
	case err != nil:
		e.c.cfg.Logger.Error("durable: handing back a claim whose lease lapsed before its step ran failed; the lease will expire",
			append(attrs, slog.Any("error", err))...)
	case n == 1:
		e.c.cfg.Logger.Warn("durable: the lease of a claim lapsed before its step ran; handed back", attrs...)
		e.wakeFreed(map[string]bool{c.queue: true}, keysOf([]*claimed{c}))
	default:
		e.unlease(c) // cancelled, perhaps: its slot is free
	}
}

// handBack gives back the row of a step whose context was cancelled by
// the engine's hard stop, or by the loss (or lapse) of its lease, and that
// then failed: the failure is the stop's or the lease's, not the step's,
// so it spends no attempt and goes through no error handling (at the last
// attempt that would fail the instance for good, where a crash would only
// have run the step again). The row, if this engine still holds it, is
// runnable again at once, attempt unchanged, as a claim handed back before
// it ran, and a wake-up hint goes to every engine serving its queue. why
// names the cause in the log.
//
// The hand-back waits up to LeaseTTL for the row's lock, which a caller's
// SignalTx or CancelTx may hold (a lease lapses that way): queued behind
// that lock, it takes the row before the reaper, which skips locked rows,
// so that the step costs no attempt and no reap. A lock held longer than
// that, against SignalTx's advice, is not the engine's failure: it logs a
// warning and leaves the row to the reaper, which takes it once the lock
// is released, and counts it as a reap (MaxReaps), as it cannot tell that
// lapse from another, the row's lock barring any mark on it.
func (e *engine) handBack(c *claimed, r ranStep, why string) {
	cfg := &e.c.cfg
	ctx, cancel := context.WithTimeout(context.Background(), cfg.LeaseTTL)
	n, err := release(ctx, e.c.pool, e.owner, []*claimed{c})
	timedOut := ctx.Err() != nil
	cancel()
	e.untrack(c)
	attrs := []any{slog.Int64("id", c.id), slog.String("fsm", c.fsm), slog.String("step", c.step), slog.Int("attempt", c.attempt), slog.Any("step_error", r.err)}
	switch {
	case err != nil && timedOut:
		cfg.Logger.Warn("durable: a step interrupted by "+why+" could not be handed back within LeaseTTL "+
			"(its row locked by another transaction, or the database unreachable); the reaper will take it back once unlocked, and the step run again",
			append(attrs, slog.Any("error", err))...)
	case err != nil:
		cfg.Logger.Error("durable: handing back a step interrupted by "+why+" failed; the lease will expire and the step run again",
			append(attrs, slog.Any("error", err))...)
	case n == 1:
		cfg.Logger.Info("durable: step interrupted by "+why+"; handed back to run again", attrs...)
		// For the other engines serving the queue, or where rows of its key wait.
		e.wakeFreed(map[string]bool{c.queue: true}, keysOf([]*claimed{c}))
	default:
		e.unlease(c) // cancelled, perhaps: its slot is free
	}
	if h := cfg.Hooks.StepStop; h != nil {
		h(StepStopEvent{
			ID: c.id, FSM: c.fsm, Step: c.step, Attempt: c.attempt, Duration: r.duration, Err: r.err,
			HandedBack: err == nil && n == 1, Fenced: err == nil && n == 0, CommitErr: err,
		})
	}
}
