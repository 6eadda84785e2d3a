package pgstore

import (
	"context"
	"sync"
	"sync/atomic"
)

// Drain waits until every statement the store sent in a batch
// (Config.Pipeline) for a caller that has since left (its context ended
// first: see the package documentation, "Pipelining") has been answered,
// and a reservation such a Begin made has been released; or until ctx
// ends, and then returns ctx's error. Call it after the last call on the
// store and before closing the pool: closing the pool cuts those releases
// off, and a reservation whose release it cuts off holds its key until
// its lease lapses. Drain does not stop the store: calls made meanwhile
// are left to the caller. Without Config.Pipeline no call outlives its
// caller, and Drain returns nil at once.
func (s *Store) Drain(ctx context.Context) error {
	return s.left.idle(ctx)
}

// leftCalls counts the work the store goes on with for callers that have
// left: a pipelined statement sent before its caller left, until its
// answer is read, and the release of a reservation such a Begin made
// (see releaseOrphan), until it ends. The zero leftCalls counts none.
// Counting is an atomic add: the lock is taken, at the count's return to
// 0, only while a Drain waits.
type leftCalls struct {
	n       atomic.Int64
	waiting atomic.Int32 // Drains waiting in idle
	mu      sync.Mutex
	// wake is made by the first Drain to wait and closed, and forgotten,
	// at the count's next return to 0: one channel, however many Drains
	// wait or give up meanwhile.
	wake chan struct{}
}

func (l *leftCalls) add() { l.n.Add(1) }

func (l *leftCalls) done() {
	if l.n.Add(-1) == 0 && l.waiting.Load() > 0 {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.wake != nil {
			close(l.wake)
			l.wake = nil
		}
	}
}

// idle returns once nothing is counted, or ctx ends (with its error).
func (l *leftCalls) idle(ctx context.Context) error {
	if l.n.Load() == 0 {
		return nil
	}
	l.waiting.Add(1)
	defer l.waiting.Add(-1)
	l.mu.Lock()
	if l.wake == nil {
		l.wake = make(chan struct{})
	}
	c := l.wake
	l.mu.Unlock()
	// Counted after waiting: a done that brought the count to 0 before
	// it saw a Drain waiting is seen here.
	if l.n.Load() == 0 {
		return nil
	}
	select {
	case <-c:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
