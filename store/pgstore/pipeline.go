package pgstore

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem/internal/leftcalls"
)

// pipeline is the querier of a lease-mode Store with Config.Pipeline: it
// queues the calls of concurrent goroutines and sends those waiting
// together on one pooled connection in PostgreSQL's pipeline mode, each
// statement followed by its own Sync, so that each is still its own
// autocommitted transaction and an error in one leaves the others alone.
//
// No goroutine runs while nothing is queued. A call that finds a lane free
// and nothing waiting runs directly, as a plain statement; a call that
// queues and finds a lane free starts a runner on it, which sends batch
// after batch until the queue is empty, and ends; a direct call that ends
// with calls queued hands its lane to a runner for them.
type pipeline struct {
	pool  *pgxpool.Pool
	lanes int // runners at most
	depth int // calls per batch at most
	// tracer is the pool's tracer when it traces batches: each batch is
	// reported as one, its calls as its queries (without their arguments,
	// which belong to the callers again once sent).
	tracer pgx.BatchTracer
	// left counts the calls sent whose callers left before the answer
	// came, until it comes (see pipeCall.finish).
	left *leftcalls.Counter

	mu      sync.Mutex
	queue   []*pipeCall
	running int
}

// batchBytes bounds the parameter bytes of one batch, so that a few large
// payloads go out in several batches rather than one long write.
const batchBytes = 1 << 20

func newPipeline(pool *pgxpool.Pool, lanes, depth int, left *leftcalls.Counter) *pipeline {
	p := &pipeline{pool: pool, lanes: lanes, depth: depth, left: left}
	p.tracer, _ = pool.Config().ConnConfig.Tracer.(pgx.BatchTracer)
	return p
}

// traceStart reports the start of a batch of calls to the tracer.
func (p *pipeline) traceStart(ctx context.Context, conn *pgx.Conn, calls []*pipeCall) context.Context {
	b := &pgx.Batch{}
	for _, c := range calls {
		b.Queue(c.query, c.args...)
	}
	return p.tracer.TraceBatchStart(ctx, conn, pgx.TraceBatchStartData{Batch: b})
}

// States of a pipeCall. The runner reads a call's arguments only in
// sending; a caller whose context ends returns at once from queued
// (nothing was sent: abandoned) and otherwise after sending, so that it
// never returns while the runner still reads its arguments. A call is
// answered once finish has its result for the caller, and left once its
// caller returned without it, whichever comes first.
const (
	callQueued int32 = iota
	callSending
	callSent
	callAbandoned
	callAnswered
	callLeft
)

// pipeCall is one statement in the queue and, once done is closed, its
// result: the first row's values, copied, and how to decode them.
type pipeCall struct {
	ctx   context.Context
	query string
	args  []any
	state atomic.Int32
	done  chan struct{}

	fields  []pgconn.FieldDescription
	formats []int16
	row     [][]byte // nil when the statement returned no row
	tag     pgconn.CommandTag
	err     error

	// watch is the batch the call is in, set by the runner before it
	// touches the call; resolved is set once the call is answered or its
	// caller has given up, whichever comes first.
	watch    *batchWatch
	resolved atomic.Bool

	orphan orphanFunc // nil, or told of an answer nobody heard
	// left counts the call from just before its caller leaves (see do)
	// until finish.
	left *leftcalls.Counter
}

// orphanFunc is given the answer (a way to scan its row) of a statement
// that succeeded after its caller left. Work it starts that outlives it
// must be counted in the call's leftcalls.Counter before it returns.
type orphanFunc func(scan func(dest ...any) error)

// finish records err (nil for success) and wakes the caller; or, when the
// caller has left, tells c.orphan if the statement succeeded, and stops
// counting the call.
func (c *pipeCall) finish(err error) {
	c.err = err
	if c.watch != nil {
		c.watch.resolve(c, false)
	}
	if c.state.Swap(callAnswered) == callLeft {
		if err == nil && c.orphan != nil {
			c.orphan(c.scan)
		}
		c.left.Done()
	}
	close(c.done)
}

// scan scans the call's row into dest; errNoRows when it returned none.
func (c *pipeCall) scan(dest ...any) error {
	if c.row == nil {
		return errNoRows
	}
	if len(dest) != len(c.row) {
		return fmt.Errorf("pgstore: %d values in a row of %d", len(dest), len(c.row))
	}
	m := typeMaps.Get().(*pgtype.Map)
	defer typeMaps.Put(m)
	for i, d := range dest {
		if err := m.Scan(c.fields[i].DataTypeOID, c.formats[i], c.row[i], d); err != nil {
			return fmt.Errorf("pgstore: scanning column %q: %w", c.fields[i].Name, err)
		}
	}
	return nil
}

// batchWatch ends the context of a batch once no call in it is waiting
// for an answer any more: each one is answered or its caller gave up.
type batchWatch struct {
	open   atomic.Int64 // calls neither answered nor given up
	ctx    context.Context
	cancel context.CancelFunc
	stops  []func() bool

	// conn is the batch's connection, once it has one. gaveUp is set
	// when every caller has left; giving up is closed once the server
	// has been asked to cancel the statement it runs on conn, and the
	// batch was cut short if it was still going cancelGrace later.
	conn     atomic.Pointer[pgconn.PgConn]
	gaveUp   atomic.Bool
	givingUp chan struct{}
}

// resolve counts c as answered, or (gaveUp) as given up by its caller,
// unless it already counted. When the last call to count is given up,
// nobody waits for what the batch still has to do, and it is cut short.
func (w *batchWatch) resolve(c *pipeCall, gaveUp bool) {
	if c.resolved.CompareAndSwap(false, true) && w.open.Add(-1) == 0 && gaveUp {
		w.gaveUp.Store(true)
		go w.giveUp()
	}
}

// giveUp cuts the batch short. Cut off from its connection, the server
// would still run the statement under way, and those after it that it
// has read (a Begin waiting for a row would reserve the key once the row
// is free, under a lease nobody holds); so when the batch has a
// connection, the server is first asked to cancel the statement, and the
// batch is given cancelGrace to read the answers, cancelled or completed
// (a Begin that completes is released: see pipeCall.orphan).
func (w *batchWatch) giveUp() {
	defer close(w.givingUp)
	if pc := w.conn.Load(); pc != nil {
		cancelThenCut(w.ctx, pc, w.cancel) // w.ctx ends when the batch is done
		return
	}
	w.cancel()
}

// end ends the batch: its context is cancelled. It reports whether its
// connection may have been sent a cancel request, which may arrive late
// and cancel the connection's next statement: it must not be reused.
func (w *batchWatch) end() (asked bool) {
	for _, stop := range w.stops {
		stop()
	}
	// Cancelled before gaveUp is looked at: a giveUp that starts after
	// the look finds w.ctx ended, and cannot send a cancel request to a
	// connection given back to the pool.
	w.cancel()
	if w.gaveUp.Load() {
		<-w.givingUp
		return true
	}
	return false
}

func (p *pipeline) queryRow(ctx context.Context, query string, args []any, dest ...any) error {
	return p.queryRowOrphan(ctx, query, args, nil, dest...)
}

// queryRowOrphan is queryRow, and when the call was sent in a batch and
// its caller left (ctx ended) before the answer came, the orphanFunc
// orphan makes (orphan may be nil) is given that answer once it comes,
// from the runner's goroutine, if the statement succeeded: what it did,
// nobody else will hear of. A direct call needs no orphan, and orphan is
// not called for it: its statement is cancelled on the server when ctx
// ends, or it answers its caller (see poolQuerier).
func (p *pipeline) queryRowOrphan(ctx context.Context, query string, args []any, orphan func() orphanFunc, dest ...any) error {
	if p.enterDirect() {
		defer p.leaveDirect()
		return poolQuerier{p.pool}.queryRow(ctx, query, args, dest...)
	}
	var o orphanFunc
	if orphan != nil {
		o = orphan()
	}
	c, err := p.do(ctx, query, args, o)
	if err != nil {
		return err
	}
	return c.scan(dest...)
}

func (p *pipeline) exec(ctx context.Context, query string, args ...any) (int64, error) {
	if p.enterDirect() {
		defer p.leaveDirect()
		return poolQuerier{p.pool}.exec(ctx, query, args...)
	}
	c, err := p.do(ctx, query, args, nil)
	if err != nil {
		return 0, err
	}
	return c.tag.RowsAffected(), nil
}

// enterDirect reports whether a call may skip the queue: when a lane is
// free and nothing waits, it is sent at once, as a plain statement, from
// the caller's goroutine, so that a lone caller pays nothing for the
// pipeline. It then holds the lane until leaveDirect.
func (p *pipeline) enterDirect() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running < p.lanes && len(p.queue) == 0 {
		p.running++
		return true
	}
	return false
}

// leaveDirect gives back the lane of a direct call, to a runner for the
// calls that queued meanwhile if there are any.
func (p *pipeline) leaveDirect() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.queue) > 0 {
		go p.run()
		return
	}
	p.running--
}

// typeMaps decode results in the callers' goroutines: a pgtype.Map caches
// scan plans and is not safe for concurrent use.
var typeMaps = sync.Pool{New: func() any { return pgtype.NewMap() }}

// do queues a call and waits for its result or the end of ctx. orphan
// may be nil (see queryRowOrphan).
func (p *pipeline) do(ctx context.Context, query string, args []any, orphan orphanFunc) (*pipeCall, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c := &pipeCall{ctx: ctx, query: query, args: args, done: make(chan struct{}), orphan: orphan, left: p.left}
	p.mu.Lock()
	p.queue = append(p.queue, c)
	if p.running < p.lanes {
		p.running++
		go p.run()
	}
	p.mu.Unlock()
	select {
	case <-c.done:
		return c, c.err
	case <-ctx.Done():
	}
	if c.state.CompareAndSwap(callQueued, callAbandoned) {
		return nil, ctx.Err() // never sent; the runner drops it
	}
	for c.state.Load() == callSending {
		runtime.Gosched() // the runner is encoding the arguments: microseconds
	}
	// Counted before the caller leaves, so that finish, which may run as
	// soon as it has, stops counting a call that was counted.
	p.left.Add()
	if c.state.CompareAndSwap(callSent, callLeft) {
		// Sent, so it may still take effect; if it does, c.orphan
		// will hear of it.
		return nil, ctx.Err()
	}
	p.left.Done()
	<-c.done // answered just now
	return c, c.err
}

// run sends batches until the queue is empty.
func (p *pipeline) run() {
	for {
		batch := p.take()
		if batch == nil {
			return
		}
		p.send(batch)
	}
}

// take removes the next batch from the queue, skipping abandoned calls,
// or ends the runner (nil) when there is none.
func (p *pipeline) take() []*pipeCall {
	p.mu.Lock()
	defer p.mu.Unlock()
	var batch []*pipeCall
	n, bytes := 0, 0
	for ; n < len(p.queue) && len(batch) < p.depth && bytes < batchBytes; n++ {
		c := p.queue[n]
		if c.state.Load() == callAbandoned {
			continue
		}
		batch = append(batch, c)
		bytes += argBytes(c.args)
	}
	clear(p.queue[:n])
	p.queue = p.queue[n:]
	if len(p.queue) == 0 {
		p.queue = nil // let the backing array go
	}
	if len(batch) == 0 {
		p.running--
		return nil
	}
	return batch
}

// argBytes estimates the size of a call's parameters.
func argBytes(args []any) int {
	n := 0
	for _, a := range args {
		switch v := a.(type) {
		case string:
			n += len(v)
		case []byte:
			n += len(v)
		default:
			n += 8
		}
	}
	return n
}

// send runs a batch on one connection and finishes every call in it.
func (p *pipeline) send(batch []*pipeCall) {
	w := watchBatch(batch)
	ctx := w.ctx
	conn, err := p.pool.Acquire(ctx)
	if err != nil {
		w.end()
		failAll(batch, err)
		return
	}
	pc := conn.Conn()
	w.conn.Store(pc.PgConn())
	defer func() {
		if w.end() {
			closeAsked(pc)
		}
		conn.Release()
	}()

	// Prepare what this connection has not prepared yet (pgx remembers
	// the statements a connection has, by their SQL).
	sds := make([]*pgconn.StatementDescription, len(batch))
	for i, c := range batch {
		if sds[i], err = pc.Prepare(ctx, c.query, c.query); err != nil {
			if isConnError(err) {
				failAll(batch, err)
				return
			}
			batch[i].finish(err)
			batch[i] = nil
		}
	}

	pl := pc.PgConn().StartPipeline(ctx)
	var eqb pgx.ExtendedQueryBuilder
	sent := batch[:0]
	for i, c := range batch {
		if c == nil || !c.state.CompareAndSwap(callQueued, callSending) {
			continue // failed to prepare, or abandoned
		}
		err := eqb.Build(pc.TypeMap(), sds[i], c.args)
		c.fields, c.formats = sds[i].Fields, append([]int16(nil), eqb.ResultFormats...)
		if err != nil {
			c.finish(fmt.Errorf("pgstore: encoding the arguments: %w", err))
			continue
		}
		pl.SendQueryStatement(sds[i], eqb.ParamValues, eqb.ParamFormats, c.formats)
		pl.SendPipelineSync()
		sent = append(sent, c)
	}
	if len(sent) > 0 && p.tracer != nil {
		// While the calls are still sending, so their arguments are
		// still the callers'.
		ctx = p.traceStart(ctx, pc, sent)
	}
	for _, c := range sent {
		c.state.Store(callSent)
	}
	if len(sent) == 0 {
		_ = pl.Close()
		return
	}
	if p.tracer != nil {
		defer func() {
			for _, c := range sent {
				p.tracer.TraceBatchQuery(ctx, pc, pgx.TraceBatchQueryData{SQL: c.query, CommandTag: c.tag, Err: c.err})
			}
			p.tracer.TraceBatchEnd(ctx, pc, pgx.TraceBatchEndData{})
		}()
	}
	if err := pl.Flush(); err != nil {
		failAll(sent, err)
		return
	}
	var failed []string // statements that failed on this connection
	for i, c := range sent {
		// After an error the server skips to the statement's Sync, and
		// answers it; an error at the Sync is the statement's
		// transaction failing to commit.
		err := c.read(pl)
		if err == nil || !isConnError(err) {
			if serr := readSync(pl); serr != nil && (err == nil || isConnError(serr)) {
				err = serr
			}
		}
		if err != nil && isConnError(err) {
			// The connection is gone, or out of step: nothing more comes.
			c.finish(err)
			failAll(sent[i+1:], err)
			_ = pl.Close()
			return
		}
		if err != nil {
			failed = append(failed, c.query)
		}
		c.finish(err)
	}
	if err := pl.Close(); err != nil {
		return
	}
	// A statement that failed may have failed because the server no
	// longer holds it as prepared (the table changed under it): prepare
	// it again next time.
	for _, q := range failed {
		_ = pc.Deallocate(ctx, q)
	}
}

// read reads c's result from pl: its first row, copied, and its command
// tag.
func (c *pipeCall) read(pl *pgconn.Pipeline) error {
	res, err := pl.GetResults()
	if err != nil {
		return err
	}
	rr, ok := res.(*pgconn.ResultReader)
	if !ok {
		return fmt.Errorf("pgstore: pipeline: got %T, want a result", res)
	}
	if rr.NextRow() {
		c.row = copyRow(rr.Values())
		for rr.NextRow() {
		}
	}
	c.tag, err = rr.Close()
	return err
}

// readSync reads the answer to a statement's Sync: nil, the server's
// error (a *pgconn.PgError) or a failure of the connection.
func readSync(pl *pgconn.Pipeline) error {
	res, err := pl.GetResults()
	if err != nil {
		if isConnError(err) {
			return err
		}
		// The error took the Sync's place; the Sync is still to come.
		if _, serr := pl.GetResults(); serr != nil {
			return serr
		}
		return err
	}
	if _, ok := res.(*pgconn.PipelineSync); !ok {
		return fmt.Errorf("pgstore: pipeline: got %T, want the end of a statement", res)
	}
	return nil
}

// copyRow copies a row's values, which the connection reuses, in one
// allocation; a NULL stays nil.
func copyRow(vals [][]byte) [][]byte {
	n := 0
	for _, v := range vals {
		n += len(v)
	}
	buf := make([]byte, 0, n)
	row := make([][]byte, len(vals))
	for i, v := range vals {
		if v != nil {
			start := len(buf)
			buf = append(buf, v...)
			row[i] = buf[start:len(buf):len(buf)]
		}
	}
	return row
}

// failAll finishes every call with err.
func failAll(calls []*pipeCall, err error) {
	for _, c := range calls {
		if c != nil {
			c.finish(err)
		}
	}
}

// isConnError reports whether err is not the server's answer to one
// statement but a failure of the connection.
func isConnError(err error) bool {
	var pe *pgconn.PgError
	return !errors.As(err, &pe)
}

// watchBatch returns the watch of a batch, whose context the batch runs
// with. It does not end when one caller gives up, since each may give up
// on its own while the others still wait; it ends when the last call
// still waiting is given up (see batchWatch.giveUp), so that neither a
// server that stops answering nor a statement waiting for a lock holds
// the runner, and its connection, once nobody waits for it (a caller's
// context often has no deadline, only a cancellation). A batch whose
// calls were all answered keeps its context for what follows the answers.
// Its deadline is cancelGrace after the latest of the calls' when every
// one has a deadline. The batch must call end when it is done.
func watchBatch(batch []*pipeCall) *batchWatch {
	var latest time.Time
	for _, c := range batch {
		d, ok := c.ctx.Deadline()
		if !ok {
			latest = time.Time{}
			break
		}
		if d.After(latest) {
			latest = d
		}
	}
	w := &batchWatch{givingUp: make(chan struct{})}
	if latest.IsZero() {
		w.ctx, w.cancel = context.WithCancel(context.Background())
	} else {
		w.ctx, w.cancel = context.WithDeadline(context.Background(), latest.Add(cancelGrace))
	}
	w.open.Store(int64(len(batch)))
	w.stops = make([]func() bool, len(batch))
	for i, c := range batch {
		c.watch = w
		w.stops[i] = context.AfterFunc(c.ctx, func() { w.resolve(c, true) })
	}
	return w
}
