package redisstore_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
	"github.com/idemgo/idem/internal/redistest"
	"github.com/idemgo/idem/store/redisstore"
)

// TestRingPurgeShardDown: a Ring skips the shards it deems down, and
// PurgeExpired on it then purges the shards that are up, but does not
// report that as a complete purge: it returns the count of what it
// deleted with an ErrUnavailable that names the shard it could not purge
// (a *redisstore.ShardsNotPurgedError).
func TestRingPurgeShardDown(t *testing.T) {
	t.Parallel()
	a, b := redistest.Start(t), redistest.Start(t)
	client := redis.NewRing(&redis.RingOptions{
		Addrs:              map[string]string{"a": a.Addr(), "b": b.Addr()},
		HeartbeatFrequency: 50 * time.Millisecond,
		DialTimeout:        time.Second,
		MaxRetries:         -1,
	})
	t.Cleanup(func() { _ = client.Close() })
	clock := idemtest.NewClock()
	s := newStore(t, client, redisstore.DefaultPrefix, clock.Now)
	ctx := context.Background()
	ns := idemtest.RandomNamespace(t)
	req := mustRequest(t, `{}`)
	for i := range 40 {
		if o, err := s.Begin(ctx, mustKey(t, ns, "r-"+strconv.Itoa(i)), req, nil); err != nil || o.Kind != idem.Fresh {
			t.Fatalf("Begin %d = %v, %v", i, o.Kind, err)
		}
	}
	direct := redis.NewClient(&redis.Options{Addr: a.Addr()})
	t.Cleanup(func() { _ = direct.Close() })
	onA, err := direct.Keys(ctx, redisstore.DefaultPrefix+string(ns)+":*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(onA) == 0 || len(onA) == 40 {
		t.Fatalf("shard a holds %d records of 40: the test needs some on each shard", len(onA))
	}

	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); client.Len() != 1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the Ring still has %d live shards 10 s after b stopped", client.Len())
		}
	}
	clock.Advance(idemtest.Retention)
	n, err := s.PurgeExpired(ctx, ns, clock.Now())
	if n != len(onA) {
		t.Errorf("PurgeExpired = %d, want the %d records of the live shard", n, len(onA))
	}
	var notPurged *redisstore.ShardsNotPurgedError
	if !errors.Is(err, idem.ErrUnavailable) || !errors.As(err, &notPurged) {
		t.Fatalf("PurgeExpired with shard b down: %v, want ErrUnavailable wrapping a *ShardsNotPurgedError", err)
	}
	t.Logf("PurgeExpired = %d, %v", n, err)
	if len(notPurged.Shards) != 1 || notPurged.Shards[0] != "b" || !strings.Contains(err.Error(), b.Addr()) {
		t.Errorf("not purged: %v (%v), want shard b at %s", notPurged.Shards, err, b.Addr())
	}
}
