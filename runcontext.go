package idem

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// runContext is the context Owner.Run gives its work: the values of its
// parent, cancelled when the lease is lost (with cause ErrLeaseLost) or when
// Run returns (with cause context.Canceled), as a context.WithCancelCause of
// the parent would be.
//
// It is built for a parent that cannot be cancelled (Done returns nil), such
// as the context.WithoutCancel of a request that Run is meant to be given:
// then the context.WithCancelCause behind it is made only when someone
// watches it (Done, or Value once it is cancelled) or when the lease is lost.
// Work that never looks at its context's cancellation, or that finishes
// before the first heartbeat, pays for no channel, no child registration and
// no cancellation. A parent that can be cancelled gets its
// context.WithCancelCause at once, so that its cancellation reaches the work.
type runContext struct {
	parent context.Context

	// inner is the context.WithCancelCause of parent, nil until needed.
	// Once set it never changes, and it answers everything.
	inner atomic.Pointer[cancelCause]
	// ended is set when Run returned before inner was made; inner, when
	// made, is made cancelled.
	ended atomic.Bool
	mu    sync.Mutex // serialises making inner with ending
}

// cancelCause is a context and the function that cancels it.
type cancelCause struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// newRunContext returns the context for a run under parent.
func newRunContext(parent context.Context) *runContext {
	c := &runContext{parent: parent}
	if parent.Done() != nil {
		c.materialize()
	}
	return c
}

// materialize returns the context.WithCancelCause behind c, making it if
// need be, cancelled if Run has already returned.
func (c *runContext) materialize() *cancelCause {
	if in := c.inner.Load(); in != nil {
		return in
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if in := c.inner.Load(); in != nil {
		return in
	}
	ctx, cancel := context.WithCancelCause(c.parent)
	if c.ended.Load() {
		cancel(nil)
	}
	in := &cancelCause{ctx: ctx, cancel: cancel}
	c.inner.Store(in)
	return in
}

// cancelCause cancels c with cause, as a lost lease does. It makes the
// context behind c, so that context.Cause reports cause.
func (c *runContext) cancelCause(cause error) { c.materialize().cancel(cause) }

// end cancels c as Run returns, without making the context behind it when
// nobody made it so far.
func (c *runContext) end() {
	if in := c.inner.Load(); in != nil {
		in.cancel(nil)
		return
	}
	c.mu.Lock()
	c.ended.Store(true)
	in := c.inner.Load()
	c.mu.Unlock()
	if in != nil { // made between the Load above and the lock
		in.cancel(nil)
	}
}

// Deadline is the parent's: cancelling adds none.
func (c *runContext) Deadline() (time.Time, bool) { return c.parent.Deadline() }

// Done returns the channel closed on cancellation. It makes the context
// behind c: a watcher needs a channel.
func (c *runContext) Done() <-chan struct{} { return c.materialize().ctx.Done() }

// Err is nil until c is cancelled, then context.Canceled.
func (c *runContext) Err() error {
	if in := c.inner.Load(); in != nil {
		return in.ctx.Err()
	}
	if c.ended.Load() {
		return context.Canceled
	}
	return nil
}

// Value returns the parent's values. Once c is cancelled it is answered by
// the context behind c, which is how context.Cause finds c's cause.
func (c *runContext) Value(key any) any {
	if in := c.inner.Load(); in != nil {
		return in.ctx.Value(key)
	}
	if c.ended.Load() {
		return c.materialize().ctx.Value(key)
	}
	return c.parent.Value(key)
}

func (c *runContext) String() string { return "idem.runContext" }
