package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/idemgo/idem"
)

// callError turns the failure of a Redis call made for operation op into
// the error the Store method returns:
//
//   - when ctx is done, an error satisfying errors.Is(err, ctx.Err()) that
//     keeps the client's error text: the call was cut short by its caller,
//     and the store may or may not be healthy;
//   - otherwise every failure, whether the server cannot be reached (refused
//     connection, closed client, pool timeout, CLUSTERDOWN, LOADING…) or
//     answers with an error (OOM, READONLY, a script error), is wrapped with
//     idem.Unavailable so that errors.Is(err, idem.ErrUnavailable) holds and
//     errors.As still reaches the go-redis error.
//
// redis.Nil never reaches callError: the store's scripts always reply with
// a value, and Get takes GET's nil as idem.ErrNotFound first.
func callError(ctx context.Context, op string, err error) error {
	if ce := ctxErr(ctx); ce != nil {
		if errors.Is(err, ce) {
			return fmt.Errorf("redisstore: %s: %w", op, err)
		}
		return fmt.Errorf("redisstore: %s: %w (%v)", op, ce, err)
	}
	return idem.Unavailable(fmt.Errorf("redisstore: %s: %w", op, err))
}

// ctxErr returns ctx.Err(), or context.DeadlineExceeded once ctx's deadline
// has passed even if ctx has not noticed yet: go-redis sets the
// connection's deadline from ctx's, and its read may time out a moment
// before ctx's own timer fires.
func ctxErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// replyError reports a reply of an unexpected shape: a record written by
// something else under the store's prefix, or a server that does not run
// the scripts as Redis does. It wraps idem.ErrUnavailable: the backend is
// failing, and the call changed nothing it could report.
func replyError(op string, reply any) error {
	return idem.Unavailable(fmt.Errorf("redisstore: %s: unexpected reply %#v", op, reply))
}

// corruptError reports a stored record that does not decode.
func corruptError(op, key, part string, err error) error {
	return idem.Unavailable(fmt.Errorf("redisstore: %s: record %s: part %s: %w", op, strconv.Quote(key), part, err))
}

// ShardsNotPurgedError is the error of a PurgeExpired on a *redis.Ring
// that could not scan every shard of the Ring's RingOptions.Addrs: those
// the Ring deemed down (it skips them), whose expired records are still
// there. It comes wrapped with idem.ErrUnavailable, and with the count of
// the records PurgeExpired deleted on the other shards.
type ShardsNotPurgedError struct {
	// Shards are the names of the shards not purged, sorted, and Addrs
	// their addresses, in the same order.
	Shards, Addrs []string
}

func (e *ShardsNotPurgedError) Error() string {
	var b strings.Builder
	b.WriteString("shards not purged, deemed down by the Ring:")
	for i, name := range e.Shards {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, " %s (%s)", name, e.Addrs[i])
	}
	return b.String()
}
