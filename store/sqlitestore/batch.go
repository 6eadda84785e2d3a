package sqlitestore

import (
	"context"
	"database/sql"
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
// queued; once running, its statements (which read the caller's arguments)
// finish first, which on a local database takes no longer than a statement.
const (
	batchQueued int32 = iota
	batchRunning
	batchAbandoned
)

type batchCall struct {
	ctx   context.Context
	run   func(ctx context.Context, q querier) error
	state atomic.Int32
	done  chan struct{}
	err   error
}

// do runs run, alone or in a batch, and returns its error, or the commit's
// when its batch failed to commit (then nothing of it was written).
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
		return c.err
	case <-ctx.Done():
		if c.state.CompareAndSwap(batchQueued, batchAbandoned) {
			return ctx.Err()
		}
		<-c.done
		return c.err
	}
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

// runQueue runs batches until the queue is empty.
func (b *batcher) runQueue() {
	for {
		batch := b.take()
		if batch == nil {
			return
		}
		b.runBatch(batch)
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

// runBatch runs the calls of batch in one transaction, each in a
// savepoint, and finishes them.
func (b *batcher) runBatch(batch []*batchCall) {
	defer func() {
		for _, c := range batch {
			close(c.done)
		}
	}()
	// The calls' own contexts are not the transaction's: a statement
	// interrupted by one caller's context would roll back everyone's.
	ctx := context.Background()
	fail := func(err error) {
		for _, c := range batch {
			if c.err == nil {
				c.err = dbError(ctx, err)
			}
		}
	}
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		fail(err)
		return
	}
	for _, c := range batch {
		if _, err := tx.ExecContext(ctx, "SAVEPOINT idem_call"); err != nil {
			_ = tx.Rollback()
			fail(err)
			return
		}
		c.err = c.run(context.WithoutCancel(c.ctx), tx)
		if c.err != nil {
			if _, err := tx.ExecContext(ctx, "ROLLBACK TO idem_call"); err != nil {
				_ = tx.Rollback()
				fail(err)
				return
			}
		}
		if _, err := tx.ExecContext(ctx, "RELEASE idem_call"); err != nil {
			_ = tx.Rollback()
			fail(err)
			return
		}
	}
	if err := tx.Commit(); err != nil {
		fail(err)
	}
}
