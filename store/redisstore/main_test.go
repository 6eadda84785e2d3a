package redisstore_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/idemgo/idem/internal/redistest"
)

func TestMain(m *testing.M) {
	// go-redis logs each failed dial; the fault tests cause thousands, and
	// check the errors the store returns instead.
	redis.SetLogger(quietLogger{})
	goleak.VerifyTestMain(redistest.Wrap(m),
		// After PoolSize failed dials in a row, a go-redis pool probes the
		// server in a goroutine of its own, which sleeps a second between
		// probes and ends at the first probe after the client is closed.
		goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}
