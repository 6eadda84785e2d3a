package main

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// staleCheck decides which pooled Postgres connections are pinged before
// use. pgxpool pings only those idle for over a second: after a server
// restart quicker than that, each connection the pool still holds is
// dead, and the first call on each fails (a whole batch of pipelined
// calls, with --batch-store-calls), one request after another answered
// 503 while the server is up. So the proxy notes when a request meets a
// store error (failed), and from then on a connection idle since before
// that error is pinged too, and replaced if dead: after a restart, the
// first failure clears the dead connections for the calls after it.
type staleCheck struct {
	start time.Time
	last  atomic.Int64 // when the last store error was met, as time since start; 0 for none
}

func newStaleCheck() *staleCheck { return &staleCheck{start: time.Now()} }

// failed notes that a request met a store error now.
func (c *staleCheck) failed() { c.last.Store(int64(max(time.Since(c.start), 1))) }

// configure makes the pool ping a connection before use when pgxpool
// would (idle for over a second), or when it has been idle since before
// the last store error.
func (c *staleCheck) configure(cfg *pgxpool.Config) {
	cfg.ShouldPing = func(_ context.Context, p pgxpool.ShouldPingParams) bool {
		if p.IdleDuration > time.Second {
			return true
		}
		last := c.last.Load()
		return last != 0 && time.Since(c.start)-time.Duration(last) < p.IdleDuration
	}
}
