package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
)

// batcher runs the lease-mode writes of a Store with Config.Batch. SQLite
// has one writer at a time and each committed transaction costs a sync of
// the log to disk, so the calls that arrive while a write is under way wait,
// and then go together into one transaction: each in a savepoint of its
// own, rolled back alone when the call fails, and all made durable by one
// commit. A call that finds nothing under way or waiting runs at once, on
// its own, as without Batch.
type batcher struct {
	db  *sql.DB
	max int // calls per transaction at most

	mu    sync.Mutex
	queue []*batchCall
	busy  bool // a call or a batch is running; a batch will follow for what queues
}

// maxBatch bounds the calls one transaction carries, and so how long it
// holds the write lock.
const maxBatch = 64

// States of a batchCall: a caller whose context ends leaves at once from
// queued, which it stays in while its batch's transaction waits for the
// write lock (another connection's transaction may hold it); once running,
// with the lock held, its statements (which read the caller's arguments)
// finish first, which on a local database takes no longer than a statement.
const (
	batchQueued int32 = iota
	batchRunning
	batchAbandoned
)

type batchCall struct {
	ctx      context.Context
	run      func(ctx context.Context, q querier) error
	state    atomic.Int32
	done     chan struct{}
	err      error
	panicked *batchPanic // run panicked: do panics with it in the caller's goroutine
}

// batchPanic is what a caller of do panics with when its call panicked in
// a batch, on the batcher's goroutine: the value run panicked with, and the
// stack where it did.
type batchPanic struct {
	value any
	stack []byte
}

func (p *batchPanic) Error() string {
	return fmt.Sprintf("sqlitestore: a batched call panicked: %v\n\n%s", p.value, p.stack)
}

// call runs c in q. A panic of run is caught, to be raised again in the
// caller's goroutine, where the caller may recover it, as it may a panic of
// a call run on its own: the batcher's goroutine goes on, c's savepoint is
// rolled back, and the other calls of the batch are not told that they
// succeeded as the panic unwinds.
func (c *batchCall) call(q querier) {
	defer func() {
		if p := recover(); p != nil {
			c.panicked = &batchPanic{value: p, stack: debug.Stack()}
		}
	}()
	c.err = c.run(context.WithoutCancel(c.ctx), q)
}

// do runs run, alone or in a batch, and returns its error, or the commit's
// when its batch failed to commit (then nothing of it was written). If run
// panics, do panics, in a batch with a *batchPanic.
func (b *batcher) do(ctx context.Context, run func(ctx context.Context, q querier) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	if !b.busy && len(b.queue) == 0 {
		b.busy = true
		b.mu.Unlock()
		defer b.doneDirect()
		return run(ctx, b.db)
	}
	c := &batchCall{ctx: ctx, run: run, done: make(chan struct{})}
	b.queue = append(b.queue, c)
	if !b.busy {
		b.busy = true
		go b.runQueue()
	}
	b.mu.Unlock()
	select {
	case <-c.done:
	case <-ctx.Done():
		if c.state.CompareAndSwap(batchQueued, batchAbandoned) {
			return ctx.Err()
		}
		<-c.done
	}
	if c.panicked != nil {
		panic(c.panicked)
	}
	return c.err
}

// doneDirect ends a call that ran on its own: the calls that queued
// meanwhile get a batch.
func (b *batcher) doneDirect() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.queue) > 0 {
		go b.runQueue()
		return
	}
	b.busy = false
}

// runQueue runs batches until the queue is empty. Each transaction starts,
// taking the write lock, before its calls are taken from the queue, so that
// they can leave while it waits. It starts with BEGIN IMMEDIATE, which takes
// the write lock (waiting for it under busy_timeout) whatever the DSN's
// _txlock says, as a lease-mode Begin's own transaction does. The calls' own
// contexts are not the transaction's: a statement interrupted by one
// caller's context would roll back everyone's.
func (b *batcher) runQueue() {
	for b.pending() {
		conn, err := beginImmediate(context.Background(), b.db)
		batch := b.take()
		switch {
		case batch == nil:
			if err == nil {
				rollback(context.Background(), conn)
			}
			return
		case err != nil:
			finish(batch, err)
		default:
			b.runBatch(conn, batch)
		}
	}
}

// pending reports whether a call waits in the queue, and ends the run
// when none does.
func (b *batcher) pending() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for len(b.queue) > 0 && b.queue[0].state.Load() == batchAbandoned {
		b.queue[0] = nil
		b.queue = b.queue[1:]
	}
	if len(b.queue) == 0 {
		b.queue, b.busy = nil, false
		return false
	}
	return true
}

// ended is the error of the other calls of a batch when the savepoint of
// c, a call that failed, cannot be rolled back (err): SQLite has ended the
// whole transaction, as it does when some statements fail in it (a full
// database or disk, an I/O error), and the batch's writes with it. Their
// error says so, with c's failure, the cause, in its chain.
func ended(c *batchCall, err error) error {
	if c.err == nil { // c panicked
		return err
	}
	return fmt.Errorf("the batch's transaction ended, writing nothing, when another call in it failed: %w", c.err)
}

// finish ends the calls of batch, giving those that have no error (and did
// not panic) err, as seen from each caller's context (nothing of theirs
// was written).
func finish(batch []*batchCall, err error) {
	for _, c := range batch {
		if c.err == nil && c.panicked == nil && err != nil {
			c.err = dbError(c.ctx, err)
		}
		close(c.done)
	}
}

// take removes the next batch from the queue, or ends the run (nil).
func (b *batcher) take() []*batchCall {
	b.mu.Lock()
	defer b.mu.Unlock()
	var batch []*batchCall
	n := 0
	for ; n < len(b.queue) && len(batch) < b.max; n++ {
		if c := b.queue[n]; c.state.CompareAndSwap(batchQueued, batchRunning) {
			batch = append(batch, c)
		}
	}
	clear(b.queue[:n])
	b.queue = b.queue[n:]
	if len(b.queue) == 0 {
		b.queue = nil
	}
	if len(batch) == 0 {
		b.busy = false
		return nil
	}
	return batch
}

// runBatch runs the calls of batch in the transaction open on conn, each
// in a savepoint, its statements prepared once for the batch (see
// batchConn), commits and finishes them. The transaction is rolled back
// unless it committed (a COMMIT that fails may leave it open).
func (b *batcher) runBatch(conn *sql.Conn, batch []*batchCall) {
	ctx := context.Background()
	q := &batchConn{conn: conn}
	var failed error
	committed := false
	defer func() {
		q.close()
		if committed {
			_ = conn.Close()
		} else {
			rollback(ctx, conn)
		}
		finish(batch, failed)
	}()
	for _, c := range batch {
		if _, err := q.ExecContext(ctx, "SAVEPOINT idem_call"); err != nil {
			failed = err
			return
		}
		c.call(q)
		if c.err != nil || c.panicked != nil {
			if _, err := q.ExecContext(ctx, "ROLLBACK TO idem_call"); err != nil {
				failed = ended(c, err)
				return
			}
		}
		if _, err := q.ExecContext(ctx, "RELEASE idem_call"); err != nil {
			failed = err
			return
		}
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		failed = err
		return
	}
	committed = true
}
