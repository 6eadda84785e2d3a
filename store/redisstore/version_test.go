package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/internal/redistest"
	"github.com/idemgo/idem/internal/testserver"
	"github.com/idemgo/idem/store/redisstore"
)

// TestCheck: Check passes on the servers the tests run (Redis 6.0 or
// later) through a single client, a Ring and a Redis Cluster, and fails
// with ErrUnavailable when the server cannot be asked.
func TestCheck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := redistest.Start(t), redistest.Start(t)
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": a.Addr(), "b": b.Addr()}})
	t.Cleanup(func() { _ = ring.Close() })
	cluster := redistest.StartCluster(t, 3)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs()})
	t.Cleanup(func() { _ = cc.Close() })
	for name, client := range map[string]redis.UniversalClient{"Client": sharedClient(t), "Ring": ring, "ClusterClient": cc} {
		s := newStore(t, client, redistest.Prefix(t), time.Now)
		if err := s.Check(ctx); err != nil {
			t.Errorf("Check on a %s: %v", name, err)
		}
	}

	port, err := testserver.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	down := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port), DialTimeout: time.Second, MaxRetries: -1})
	t.Cleanup(func() { _ = down.Close() })
	var ve *redisstore.VersionError
	if err := newStore(t, down, "", time.Now).Check(ctx); !errors.Is(err, idem.ErrUnavailable) || errors.As(err, &ve) {
		t.Errorf("Check with no server: %v, want ErrUnavailable", err)
	}
}
