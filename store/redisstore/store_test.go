package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
	"github.com/idemgo/idem/internal/redistest"
	"github.com/idemgo/idem/internal/testserver"
	"github.com/idemgo/idem/store/redisstore"
)

// maxPayload is the payload limit of the stores under test.
const maxPayload = 1 << 16

// sharedClient returns a client of the shared test server, closed when t
// ends.
func sharedClient(t testing.TB) *redis.Client {
	t.Helper()
	opts, err := redis.ParseURL(redistest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// newStore returns a store on client with the suite's defaults, under
// prefix.
func newStore(t testing.TB, client redis.UniversalClient, prefix string, now func() time.Time) *redisstore.Store {
	return newStoreAuto(t, client, prefix, now, false)
}

// newStoreAuto is newStore, with the calls auto-pipelined when auto.
func newStoreAuto(t testing.TB, client redis.UniversalClient, prefix string, now func() time.Time, auto bool) *redisstore.Store {
	t.Helper()
	s, err := redisstore.New(client, redisstore.Config{
		Prefix:       prefix,
		Retention:    idemtest.Retention,
		Lease:        idemtest.Lease,
		MaxPayload:   maxPayload,
		Now:          now,
		AutoPipeline: auto,
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// autoModes names the two ways a store sends its calls: one round trip
// each, or auto-pipelined (Config.AutoPipeline).
var autoModes = []struct {
	name string
	auto bool
}{{"RoundTrips", false}, {"AutoPipeline", true}}

func TestConformance(t *testing.T) {
	t.Parallel()
	for _, m := range autoModes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			client := sharedClient(t)
			idemtest.Exercise(t, idemtest.Harness{
				NewStore: func(t *testing.T, now func() time.Time) idem.Store {
					return newStoreAuto(t, client, redistest.Prefix(t), now, m.auto)
				},
				MaxPayload: maxPayload,
				NewUnreachableStore: func(t *testing.T) idem.Store {
					port, err := testserver.FreePort()
					if err != nil {
						t.Fatal(err)
					}
					c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port), DialTimeout: 2 * time.Second})
					t.Cleanup(func() { _ = c.Close() })
					return newStoreAuto(t, c, redistest.Prefix(t), time.Now, m.auto)
				},
			})
		})
	}
}

// TestConformanceBeginByGet runs the suite with every Begin reading its
// key first, as its script does on a server before Redis 7.0, instead of
// writing first with SET … NX.
func TestConformanceBeginByGet(t *testing.T) {
	t.Parallel()
	client := sharedClient(t)
	idemtest.Exercise(t, idemtest.Harness{
		NewStore: func(t *testing.T, now func() time.Time) idem.Store {
			s := newStore(t, client, redistest.Prefix(t), now)
			redisstore.BeginByGet(s)
			return s
		},
		MaxPayload: maxPayload,
	})
}

func TestConformanceCluster(t *testing.T) {
	t.Parallel()
	cluster := redistest.StartCluster(t, 3)
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs()})
	t.Cleanup(func() { _ = client.Close() })
	for _, m := range autoModes {
		t.Run(m.name, func(t *testing.T) {
			idemtest.Exercise(t, idemtest.Harness{
				NewStore: func(t *testing.T, now func() time.Time) idem.Store {
					return newStoreAuto(t, client, redisstore.DefaultPrefix, now, m.auto)
				},
				MaxPayload: maxPayload,
			})
		})
	}
}

// TestConformanceRing runs the suite on a go-redis Ring of two servers,
// whose PurgeExpired scans every shard.
func TestConformanceRing(t *testing.T) {
	t.Parallel()
	a, b := redistest.Start(t), redistest.Start(t)
	client := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": a.Addr(), "b": b.Addr()}})
	t.Cleanup(func() { _ = client.Close() })
	idemtest.Exercise(t, idemtest.Harness{
		NewStore: func(t *testing.T, now func() time.Time) idem.Store {
			return newStore(t, client, redisstore.DefaultPrefix, now)
		},
		MaxPayload: maxPayload,
	})
	// go-redis has no auto-pipeliner for a Ring: New says so.
	_, err := redisstore.New(client, redisstore.Config{AutoPipeline: true})
	if err == nil || !strings.Contains(err.Error(), "Config.AutoPipeline") {
		t.Errorf("New on a Ring with AutoPipeline: %v, want an error naming Config.AutoPipeline", err)
	}
}

// TestCluster runs what needs a cluster of its own, in order: PurgeExpired
// across every master, then a master going down.
func TestCluster(t *testing.T) {
	t.Parallel()
	cluster := redistest.StartCluster(t, 3)
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs(), DialerRetries: 1, MaxRedirects: 1})
	t.Cleanup(func() { _ = client.Close() })
	clock := idemtest.NewClock()
	s := newStore(t, client, redisstore.DefaultPrefix, clock.Now)
	t.Run("PurgeExpiredEveryMaster", func(t *testing.T) { testPurgeEveryMaster(t, client, s, clock) })
	t.Run("MasterDown", func(t *testing.T) { testMasterDown(t, cluster, s) })
}

// testPurgeEveryMaster spreads records over the hash slots, so that every
// master holds some, and checks that PurgeExpired finds and deletes them
// all.
func testPurgeEveryMaster(t *testing.T, client *redis.ClusterClient, s *redisstore.Store, clock *idemtest.Clock) {
	ctx := context.Background()
	ns := idemtest.RandomNamespace(t)
	const n = 300
	req := mustRequest(t, `{"n":1}`)
	for i := range n {
		k := mustKey(t, ns, "purge-"+strconv.Itoa(i))
		if o, err := s.Begin(ctx, k, req, nil); err != nil || o.Kind != idem.Fresh {
			t.Fatalf("Begin %d: %v %v", i, o.Kind, err)
		}
	}
	var mu sync.Mutex
	perMaster := map[string]int{}
	err := client.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		keys, err := c.Keys(ctx, redisstore.DefaultPrefix+string(ns)+":*").Result()
		mu.Lock()
		defer mu.Unlock()
		perMaster[c.Options().Addr] = len(keys)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(perMaster) != 3 {
		t.Fatalf("records per master = %v, want 3 masters", perMaster)
	}
	for addr, k := range perMaster {
		if k == 0 {
			t.Fatalf("master %s holds no record (%v): the test needs records on every master", addr, perMaster)
		}
	}
	clock.Advance(idemtest.Retention)
	got, err := s.PurgeExpired(ctx, ns, clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if got != n {
		t.Errorf("PurgeExpired = %d, want %d", got, n)
	}
}

// testMasterDown stops one master: calls on keys in its slots fail with
// ErrUnavailable, calls on the others go on working.
func testMasterDown(t *testing.T, cluster *redistest.Cluster, s *redisstore.Store) {
	ctx := context.Background()
	if err := cluster.Nodes()[0].Stop(); err != nil {
		t.Fatal(err)
	}
	ns := idemtest.RandomNamespace(t)
	req := mustRequest(t, `{"n":1}`)
	var ok, unavailable int
	for i := range 30 {
		o, err := s.Begin(ctx, mustKey(t, ns, "down-"+strconv.Itoa(i)), req, nil)
		switch {
		case err == nil && o.Kind == idem.Fresh:
			ok++
		case errors.Is(err, idem.ErrUnavailable):
			unavailable++
		default:
			t.Fatalf("Begin %d with a master down: %v %v, want Fresh or ErrUnavailable", i, o.Kind, err)
		}
	}
	if ok == 0 || unavailable == 0 {
		t.Errorf("with one master of three down: %d Fresh, %d unavailable; want some of each", ok, unavailable)
	}
	if _, err := s.PurgeExpired(ctx, ns, time.Now()); !errors.Is(err, idem.ErrUnavailable) {
		t.Errorf("PurgeExpired with a master down: %v, want ErrUnavailable", err)
	}
}

func mustRequest(t testing.TB, payload string) idem.Request {
	t.Helper()
	r, err := idem.NewRequest([]byte(payload))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func mustKey(t testing.TB, ns idem.Namespace, value string) idem.Key {
	t.Helper()
	k, err := idem.ParseKey(ns, value)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
