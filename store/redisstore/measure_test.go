package redisstore_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
	"github.com/idemgo/idem/internal/redistest"
	"github.com/idemgo/idem/store/redisstore"
)

// TestMeasureServerCost measures what a Begin+Commit pair costs a private
// Redis server: 20,000 pairs of small records from 32 workers,
// auto-pipelined, with a replay (a Begin of a committed key) after every
// fourth pair. It reports the server's CPU time (INFO cpu) and the time
// its scripts took (INFO commandstats) per pair. It is a measurement, not
// a test: it runs only when IDEM_REDIS_MEASURE is set.
func TestMeasureServerCost(t *testing.T) {
	if os.Getenv("IDEM_REDIS_MEASURE") == "" {
		t.Skip("a measurement: set IDEM_REDIS_MEASURE to run it")
	}
	const pairs, workers = 20_000, 32
	ctx := context.Background()
	srv := redistest.Start(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: workers})
	t.Cleanup(func() { _ = client.Close() })
	s, err := redisstore.New(client, redisstore.Config{AutoPipeline: true})
	if err != nil {
		t.Fatal(err)
	}
	ns := idemtest.RandomNamespace(t)
	req := mustRequest(t, `{"method":"POST","target":"/payments","amount":1000}`)
	result := []byte(`{"status":201,"body":"{\"id\":\"pay_123\",\"amount\":1000}"}`)
	pair := func(i int) {
		key := mustKey(t, ns, "k"+strconv.Itoa(i))
		o, err := s.Begin(ctx, key, req, nil)
		if err != nil || o.Kind != idem.Fresh {
			t.Errorf("Begin %d = %v, %v", i, o.Kind, err)
			return
		}
		if err := s.Commit(ctx, key, o.Lease, result); err != nil {
			t.Errorf("Commit %d: %v", i, err)
			return
		}
		if i%4 == 0 {
			if o, err := s.Begin(ctx, key, req, nil); err != nil || o.Kind != idem.PriorResult {
				t.Errorf("replay %d = %v, %v", i, o.Kind, err)
			}
		}
	}
	pair(-1) // loads the scripts
	if err := client.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	cpuBefore := serverCPU(t, client)
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < pairs; i = int(next.Add(1)) - 1 {
				pair(i)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := serverCPU(t, client) - cpuBefore
	stats, err := client.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var usec, calls int64
	for line := range strings.Lines(stats) {
		name, fields, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && strings.HasPrefix(name, "cmdstat_") {
			t.Log(strings.TrimSpace(line))
		}
		if !ok || (name != "cmdstat_evalsha" && name != "cmdstat_eval") {
			continue
		}
		for f := range strings.SplitSeq(fields, ",") {
			k, v, _ := strings.Cut(f, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "usec":
				usec += n
			case "calls":
				calls += n
			}
		}
	}
	t.Logf("%d pairs in %v (%.0f/s): server CPU %.2f µs/pair, scripts %.2f µs/pair (%d script calls)",
		pairs, elapsed.Round(time.Millisecond), float64(pairs)/elapsed.Seconds(), cpu*1e6/pairs, float64(usec)/pairs, calls)
}

// serverCPU reads the server's used_cpu_sys + used_cpu_user, in seconds.
func serverCPU(t *testing.T, client *redis.Client) float64 {
	t.Helper()
	info, err := client.Info(context.Background(), "cpu").Result()
	if err != nil {
		t.Fatal(err)
	}
	var total float64
	for line := range strings.Lines(info) {
		name, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (name == "used_cpu_sys" || name == "used_cpu_user") {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			total += f
		}
	}
	return total
}
