package redistest_test

import (
	"context"
	"strconv"
	"sync"
	"testing"

	"github.com/idemgo/idem/internal/redistest"
	"github.com/redis/go-redis/v9"
)

func TestCluster(t *testing.T) {
	t.Parallel()
	cluster := redistest.StartCluster(t, 3)
	if n := len(cluster.Addrs()); n != 3 {
		t.Fatalf("%d addresses, want 3", n)
	}
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs()})
	t.Cleanup(func() { _ = c.Close() })
	ctx := testContext(t)

	slots := map[int64]bool{}
	for i := range 50 {
		key := "k" + strconv.Itoa(i)
		if err := c.Set(ctx, key, i, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", key, err)
		}
		slot, err := c.ClusterKeySlot(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		slots[slot] = true
	}
	if len(slots) < 10 {
		t.Fatalf("keys fell in %d slots, want many", len(slots))
	}

	// Every master holds some of the keys.
	var mu sync.Mutex
	sizes := map[string]int64{}
	err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		n, err := m.DBSize(ctx).Result()
		mu.Lock()
		sizes[m.Options().Addr] = n
		mu.Unlock()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for addr, n := range sizes {
		if n == 0 {
			t.Errorf("master %s holds no keys: %v", addr, sizes)
		}
	}
	if len(sizes) != 3 {
		t.Errorf("%d masters, want 3: %v", len(sizes), sizes)
	}
}
