package durable

import (
	"context"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"time"
)

// listen holds one connection that LISTENs for wake-up hints, and pokes
// the picker of the queue each names, and for due hints, and moves the
// timer of the queue's picker to the moment each names, if that is
// sooner. Hints from other schemas (other engines sharing the database)
// are ignored, and so are those of a form it does not know. On a
// connection error it tries again after PollInterval; polling covers the
// gap.
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
	for _, channel := range []string{wakeupChannel, dueChannel} {
		if _, err := conn.Exec(e.bgCtx, "LISTEN "+channel); err != nil {
			return err
		}
	}
	// After LISTEN, poke every queue once: a hint sent before it is lost.
	// The claims that follow learn, too, of the rows not yet eligible.
	for _, q := range e.queues {
		q.wake()
	}
	prefix := e.schema + ":"
	for {
		n, err := conn.WaitForNotification(e.bgCtx)
		if err != nil {
			return err
		}
		switch n.Channel {
		case wakeupChannel:
			if queue, ok := strings.CutPrefix(n.Payload, prefix); ok {
				e.poke(queue)
			}
		case dueChannel:
			if queue, in, ok := parseDueHint(n.Payload, prefix); ok {
				e.eligibleAt(queue, time.Now().Add(in))
			}
		}
	}
}

// parseDueHint reads the payload of a due hint (see dueChannel): the
// queue, and how long until its row becomes eligible. ok is false for a
// hint of another schema than prefix names ("schema:"), or one that is
// not of that form.
func parseDueHint(payload, prefix string) (queue string, in time.Duration, ok bool) {
	digits, rest, ok := strings.Cut(payload, ":")
	if !ok {
		return "", 0, false
	}
	us, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || us <= 0 {
		return "", 0, false
	}
	queue, ok = strings.CutPrefix(rest, prefix)
	if !ok {
		return "", 0, false
	}
	// A moment beyond what a Duration holds is as good as never: the
	// picker's poll comes first.
	return queue, time.Duration(min(us, int64(math.MaxInt64/time.Microsecond))) * time.Microsecond, true
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
