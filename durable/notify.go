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

// notifyQueuesSQL sends a wake-up hint for each queue $1 names.
const notifyQueuesSQL = `SELECT pg_notify('` + wakeupChannel + `', current_schema() || ':' || q) FROM unnest($1::text[]) AS q`

// wake tells every engine that rows of queues became runnable behind its
// back (reaped, timed out, handed back): this engine's pickers at once,
// the others, which may serve queues this one does not, through a hint.
// A hint that fails to go out is only logged: polling covers the gap.
func (e *engine) wake(queues map[string]bool) {
	if len(queues) == 0 {
		return
	}
	names := make([]string, 0, len(queues))
	for q := range queues {
		e.poke(q)
		names = append(names, q)
	}
	ctx, cancel := e.dbContext()
	defer cancel()
	if _, err := e.c.pool.Exec(ctx, notifyQueuesSQL, names); err != nil {
		e.c.cfg.Logger.Warn("durable: wake-up hint failed; other engines will poll", slog.Any("error", err))
	}
}
