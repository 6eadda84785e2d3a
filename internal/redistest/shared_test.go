package redistest_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem/internal/redistest"
	"github.com/redis/go-redis/v9"
)

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// client returns a client for url, closed when t ends.
func client(t *testing.T, url string) *redis.Client {
	t.Helper()
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestURLAndPrefix(t *testing.T) {
	t.Parallel()
	url := redistest.URL(t)
	if !strings.HasPrefix(url, "redis://") {
		t.Fatalf("URL = %q, want a redis:// URL", url)
	}
	c := client(t, url)
	ctx := testContext(t)

	var prefix string
	t.Run("inner", func(t *testing.T) {
		prefix = redistest.Prefix(t)
		if other := redistest.Prefix(t); other == prefix {
			t.Fatalf("two calls gave the same prefix %q", prefix)
		}
		for _, k := range []string{"a", "b", "c"} {
			if err := c.Set(ctx, prefix+k, "v", 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if v, err := c.Get(ctx, prefix+"a").Result(); err != nil || v != "v" {
			t.Fatalf("Get = %q, %v; want v", v, err)
		}
	})
	keys, err := c.Keys(ctx, prefix+"*").Result()
	if err != nil || len(keys) != 0 {
		t.Fatalf("keys under %q after its test ended: %v, %v; want none", prefix, keys, err)
	}
}

func TestPrivateServerStopAndStart(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { _ = c.Close() })
	ctx := testContext(t)
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}

	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING on a stopped server succeeded")
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("after Stop and Start: Get = %q, %v; want v", v, err)
	}

	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING on a killed server succeeded")
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, "k").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("after Kill and Start: Get error = %v, want redis.Nil", err)
	}
}
