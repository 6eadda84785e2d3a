package durable

import (
	"context"
	"log/slog"
	"strings"
	"time"
)

// listen holds one connection that LISTENs for wake-up hints and pokes the
// picker of the queue each names. Hints from other schemas (other engines
// sharing the database) are ignored. On a connection error it tries again
// after PollInterval; polling covers the gap.
func (e *engine) listen() {
	cfg := &e.c.cfg
	for e.bgCtx.Err() == nil {
		err := e.listenOnce()
		if e.bgCtx.Err() != nil {
			return
		}
		cfg.Logger.Warn("durable: LISTEN connection lost; polling meanwhile", slog.Any("error", err))
		select {
		case <-e.bgCtx.Done():
			return
		case <-time.After(cfg.PollInterval):
		}
	}
}

func (e *engine) listenOnce() error {
	pc, err := e.c.pool.Acquire(e.bgCtx)
	if err != nil {
		return err
	}
	// The connection leaves the pool: it ends LISTENing, and a wait
	// interrupted by cancellation leaves it unusable anyway.
	conn := pc.Hijack()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = conn.Close(ctx)
	}()
	if _, err := conn.Exec(e.bgCtx, "LISTEN "+wakeupChannel); err != nil {
		return err
	}
	// After LISTEN, poke every queue once: a hint sent before it is lost.
	for _, q := range e.queues {
		q.wake()
	}
	prefix := e.schema + ":"
	for {
		n, err := conn.WaitForNotification(e.bgCtx)
		if err != nil {
			return err
		}
		if queue, ok := strings.CutPrefix(n.Payload, prefix); ok {
			e.poke(queue)
		}
	}
}
