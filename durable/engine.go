package durable

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// engine is one run of a client's engine, from Start to the end of Stop.
type engine struct {
	c      *Client
	owner  string
	schema string
	queues map[string]*queue

	// workCtx is the parent of the steps' contexts; hardStop cancels it,
	// with cause ErrEngineStopping, when Stop's context ends before the
	// steps do (or Start's context is cancelled).
	workCtx  context.Context
	hardStop func()
	// bgCtx governs the heartbeat, reaper, timer, collector and listener,
	// which run until the last step has committed.
	bgCtx    context.Context
	bgCancel context.CancelFunc

	stopping chan struct{} // closed when Stop begins
	stopOnce sync.Once
	stopped  chan struct{} // closed when the run is over

	pickers, workers, background sync.WaitGroup

	heldMu sync.Mutex
	held   map[*claimed]struct{} // claims this run leases: buffered and running

	// deadlines tells the await timer, without a query, of the earliest
	// await deadline of the rows this run parked with AwaitTimeout since
	// the timer last looked: the timer is brought forward to it, if that
	// is sooner, with no query until then.
	deadlines *soonest
}

// Start starts the engine: for each queue of Config.Queues a picker and
// Concurrency workers, plus the heartbeat, the reaper, the await timer, the
// garbage collector and, unless Config.PollOnly, the LISTEN connection.
// It returns once they run. It fails when the client has no queues, is
// already running, the database's default isolation is not READ
// COMMITTED, which the engine's statements rely on, or the pool's
// search_path reaches no table durable_instance (Migrate has not run, or
// the search_path names no schema that exists).
//
// ctx governs the run: cancelling it stops the engine as Stop does with a
// context that has already ended (running steps' contexts are cancelled,
// with cause ErrEngineStopping).
// Call Stop for a graceful stop.
func (c *Client) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.run != nil {
		select {
		case <-c.run.stopped:
		default:
			return errors.New("durable: Start: the engine is already running")
		}
	}
	if len(c.cfg.Queues) == 0 {
		return errors.New("durable: Start: Config.Queues is empty: the engine has nothing to run")
	}
	var (
		isolation, schema string
		migrated          bool
	)
	err := c.pool.QueryRow(ctx, `SELECT current_setting('transaction_isolation'), coalesce(current_schema(), ''),
       to_regclass('durable_instance') IS NOT NULL`).Scan(&isolation, &schema, &migrated)
	if err != nil {
		return fmt.Errorf("durable: Start: %w", err)
	}
	if isolation != "read committed" {
		return fmt.Errorf("durable: Start: the default transaction isolation is %q; the engine needs \"read committed\"", isolation)
	}
	if schema == "" {
		return errors.New("durable: Start: the pool's search_path names no schema that exists")
	}
	if !migrated {
		return fmt.Errorf("durable: Start: schema %q has no table durable_instance: run Client.Migrate (idem durable migrate) first", schema)
	}

	e := &engine{
		c:        c,
		owner:    c.cfg.ID,
		schema:   schema,
		queues:   make(map[string]*queue, len(c.cfg.Queues)),
		stopping: make(chan struct{}),
		stopped:  make(chan struct{}),
		held:     make(map[*claimed]struct{}),

		deadlines: newSoonest(),
	}
	workCtx, cancelWork := context.WithCancelCause(context.WithValue(context.WithoutCancel(ctx), runKey{}, e))
	e.workCtx, e.hardStop = workCtx, func() { cancelWork(ErrEngineStopping) }
	e.bgCtx, e.bgCancel = context.WithCancel(context.WithoutCancel(ctx))
	for name, qc := range c.cfg.Queues {
		e.queues[name] = newQueue(e, name, qc)
	}
	for _, q := range e.queues {
		e.pickers.Add(1)
		go q.pick()
		for range q.concurrency {
			e.workers.Add(1)
			go q.work()
		}
	}
	e.goBackground(e.heartbeat)
	e.goBackground(e.reap)
	e.goBackground(e.timer)
	if c.cfg.GCRetention >= 0 {
		e.goBackground(e.collect)
	}
	if !c.cfg.PollOnly {
		e.goBackground(e.listen)
	}
	go func() {
		select {
		case <-ctx.Done():
			canceled, cancel := context.WithCancel(context.Background())
			cancel()
			_ = e.stop(canceled)
		case <-e.stopping:
		}
	}()
	c.run = e
	return nil
}

// Stop stops the engine gracefully, queue by queue: pickers stop at once;
// rows claimed and not yet running are handed back at once (runnable
// again, attempt unchanged); running steps finish and their outcomes are
// committed; then the heartbeat and the other background work stop. It
// returns when all of that is done. If ctx ends first, the running steps'
// contexts are cancelled, with cause ErrEngineStopping, Stop still waits for them to return and commit,
// and it returns ctx's error. A step so cancelled that fails is not
// charged with the failure: its error handling (FSMConfig.OnError) is not
// called, and its row is handed back, runnable with its attempt unchanged
// (StepStopEvent.HandedBack); one that succeeds anyway
// is committed. Stop on a client that is not running returns
// nil.
//
// Stop waits for the running steps, so a step (or its error handling)
// that calls it cannot wait: given the step's context, or one derived from
// it, Stop begins the graceful stop and returns ErrStopInStep at once; the
// stop ends once that step, and the others, have returned and committed
// (see Stopped). Given another context, a step's Stop waits for the step
// itself, forever. Hooks must not call Stop (see Hooks).
func (c *Client) Stop(ctx context.Context) error {
	c.mu.Lock()
	e := c.run
	c.mu.Unlock()
	if e == nil {
		return nil
	}
	if ctx.Value(runKey{}) == e {
		e.beginStop()
		return ErrStopInStep
	}
	return e.stop(ctx)
}

// runKey is the key of the engine run in its steps' contexts, by which
// Stop tells that a step called it.
type runKey struct{}

// Stopped returns a channel closed when the engine's current run is over
// (at once if it never started).
func (c *Client) Stopped() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.run == nil {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	return c.run.stopped
}

func (e *engine) stop(ctx context.Context) error {
	e.beginStop()
	select {
	case <-e.stopped:
		return nil
	case <-ctx.Done():
		e.hardStop()
		<-e.stopped
		return ctx.Err()
	}
}

// beginStop begins the graceful stop, once.
func (e *engine) beginStop() {
	e.stopOnce.Do(func() {
		close(e.stopping)
		go e.shutdown()
	})
}

// shutdown drains the queues, waits for the workers and then stops the
// background work.
func (e *engine) shutdown() {
	e.pickers.Wait()
	var wg sync.WaitGroup
	for _, q := range e.queues {
		wg.Go(q.drain)
	}
	wg.Wait()
	e.workers.Wait()
	e.bgCancel()
	e.background.Wait()
	e.hardStop()
	close(e.stopped)
}

// goBackground runs fn until bgCtx ends.
func (e *engine) goBackground(fn func()) {
	e.background.Add(1)
	go func() {
		defer e.background.Done()
		fn()
	}()
}

// track and untrack keep the set of claims the heartbeat extends.
func (e *engine) track(cs []*claimed) {
	e.heldMu.Lock()
	for _, c := range cs {
		e.held[c] = struct{}{}
	}
	e.heldMu.Unlock()
}

func (e *engine) untrack(cs ...*claimed) {
	e.heldMu.Lock()
	for _, c := range cs {
		delete(e.held, c)
	}
	e.heldMu.Unlock()
}

// heldClaims returns the claims this run holds.
func (e *engine) heldClaims() []*claimed {
	e.heldMu.Lock()
	defer e.heldMu.Unlock()
	out := make([]*claimed, 0, len(e.held))
	for c := range e.held {
		out = append(out, c)
	}
	return out
}

// pokeLocal wakes the picker of queue in this client's running engine, if
// it has one: an insert or a signal from the same process needs no
// wake-up hint from the database.
func (c *Client) pokeLocal(queue string) {
	c.mu.Lock()
	e := c.run
	c.mu.Unlock()
	if e != nil {
		e.poke(queue)
	}
}

// madeLocal tells this client's running engine, if it has one, of a row
// of queue it made (inserted, retried): eligible at at, or at once when
// at is zero or past. A row eligible at once pokes the picker, as
// pokeLocal does; a row for later moves the picker's timer to at, if
// sooner, with no claim until then. Either way no wake-up hint from the
// database is needed.
func (c *Client) madeLocal(queue string, at time.Time) {
	c.mu.Lock()
	e := c.run
	c.mu.Unlock()
	if e != nil {
		e.eligibleAt(queue, at)
	}
}

// eligibleAt tells the picker of queue, if this engine serves it, that a
// row becomes eligible at at, or is at once when at is zero or past: the
// picker is poked, or its timer moved to at if that is sooner, with no
// claim until then.
func (e *engine) eligibleAt(queue string, at time.Time) {
	q, ok := e.queues[queue]
	switch {
	case !ok:
	case at.IsZero() || !at.After(time.Now()):
		q.wake()
	default:
		q.scheduled.note(at)
	}
}

// committed wakes, once a transaction of the engine's has committed, the
// Waits on the instances it ended and this engine's pickers of the queues
// in which it made other rows runnable (the commit's wake-up hints reach
// no engine with Config.PollOnly).
func (e *engine) committed(ended []int64, queues []string) {
	e.c.ended(ended...)
	for _, queue := range queues {
		e.poke(queue)
	}
}

// poke wakes the picker of queue, if this engine serves it.
func (e *engine) poke(queue string) {
	if q, ok := e.queues[queue]; ok {
		q.wake()
	}
}

// dbContext bounds the engine's own statements: a statement that takes
// longer than a lease is worthless.
func (e *engine) dbContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(e.bgCtx), e.c.cfg.LeaseTTL)
}

// every runs fn every interval until bgCtx ends.
func (e *engine) every(interval time.Duration, fn func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-e.bgCtx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}
