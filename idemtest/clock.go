package idemtest

import (
	"sync"
	"time"
)

// Clock is a manual clock for stores under test. It starts at the current
// wall time truncated to the millisecond, so that backends storing
// millisecond or microsecond timestamps round-trip it exactly, and moves
// only when Advance is called. It is safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a Clock set to the current time, truncated to the
// millisecond.
func NewClock() *Clock {
	return &Clock{now: time.Now().UTC().Truncate(time.Millisecond)}
}

// Now returns the clock's time. Pass the method value c.Now to a store.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
