package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/store/redisstore"
)

// redisWorkers is the number of goroutines issuing Begin+Commit pairs.
const redisWorkers = 32

// BenchmarkRedisstoreBeginCommit: a fresh key begun and committed, per op,
// by 32 concurrent workers, against the Redis server TEST_REDIS_URL names.
// The baseline is a plain go-redis loop with the same concurrency sending
// the same two Lua scripts' worth of work (SET … NX; GETRANGE,
// SETRANGE, APPEND) by EVALSHA, without any of the store's checks. Reported:
// "x-baseline" (time per op over the baseline's, as the other benchmarks
// here), "throughput-ratio" (pairs/s over the baseline's pairs/s; the goal
// is at least 0.9), both as the median over chunks of 1000 pairs, and the
// store's "pairs/s".
func BenchmarkRedisstoreBeginCommit(b *testing.B) { benchRedisstore(b, redisWorkers, false) }

// BenchmarkRedisstoreBeginCommitSingle: the same with one worker, for the
// latency of a pair beside the baseline's.
func BenchmarkRedisstoreBeginCommitSingle(b *testing.B) { benchRedisstore(b, 1, false) }

// BenchmarkRedisstoreBeginCommitAutoPipeline: the store with
// Config.AutoPipeline, as idem proxy runs it, beside the same plain loop
// sent through the same client's auto-pipeliner.
func BenchmarkRedisstoreBeginCommitAutoPipeline(b *testing.B) {
	benchRedisstore(b, redisWorkers, true)
}

func benchRedisstore(b *testing.B, workers int, auto bool) {
	client := benchRedisClient(b)
	s, err := redisstore.New(client, redisstore.Config{Prefix: benchRedisPrefix(b, client), AutoPipeline: auto})
	if err != nil {
		b.Fatal(err)
	}
	var baseClient redis.UniversalClient = client
	if auto {
		if baseClient, err = client.AutoPipeline(); err != nil {
			b.Fatal(err)
		}
	}
	ks, _ := keys(b, b.N)
	ctx := context.Background()
	store := func(i int) error {
		o, err := s.Begin(ctx, ks[i], benchReq, nil)
		if err != nil {
			return err
		}
		if o.Kind != idem.Fresh {
			return fmt.Errorf("Begin: %s, want fresh", o.Kind)
		}
		return s.Commit(ctx, ks[i], o.Lease, benchResult)
	}
	baseline := baselineRedisBeginCommit(b, baseClient)
	// The two take turns in chunks, in the order ABBA, so that both see the
	// same load on a shared machine and the same state of the server. The
	// ratio reported is the median of the chunks' ratios, which a burst of
	// load elsewhere on the machine does not move much.
	const chunk = 1000
	var own, base time.Duration
	var ratios []float64
	b.ReportAllocs()
	b.ResetTimer()
	b.StopTimer()
	for lo, turn := 0, 0; lo < b.N; lo, turn = lo+chunk, turn+1 {
		hi := min(lo+chunk, b.N)
		var o, bl time.Duration
		if turn%2 == 0 {
			b.StartTimer()
			o = runWorkers(b, workers, lo, hi, store)
			b.StopTimer()
			bl = runWorkers(b, workers, lo, hi, baseline)
		} else {
			bl = runWorkers(b, workers, lo, hi, baseline)
			b.StartTimer()
			o = runWorkers(b, workers, lo, hi, store)
			b.StopTimer()
		}
		own, base = own+o, base+bl
		ratios = append(ratios, float64(bl)/float64(o))
	}
	slices.Sort(ratios)
	baseNs := float64(base.Nanoseconds()) / float64(b.N)
	b.ReportMetric(1/ratios[len(ratios)/2], "x-baseline")
	b.ReportMetric(ratios[len(ratios)/2], "throughput-ratio")
	b.ReportMetric(float64(b.N)/own.Seconds(), "pairs/s")
	b.ReportMetric(baseNs, "baseline-ns/op")
}

// baselineBeginScript does the work of the store's Begin of a new key:
// one SET … NX of the record.
var baselineBeginScript = redis.NewScript(`
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[3]) then
	return {5, 0}
end
return {1, 1, ARGV[2], 0}
`)

// baselineCommitScript does the work of the store's Commit: one GETRANGE
// of the header and token, one SETRANGE of the status, one APPEND of the
// result.
var baselineCommitScript = redis.NewScript(`
local h = redis.call('GETRANGE', KEYS[1], 0, 255)
if #h < 46 or string.sub(h, 47 + 33, 46 + 33 + 32) ~= ARGV[1] then
	return 0
end
redis.call('SETRANGE', KEYS[1], 4, 'c')
redis.call('APPEND', KEYS[1], ARGV[2])
return 1
`)

// baselineRedisBeginCommit returns the baseline's op i: a pair of the
// baseline scripts on a new key.
func baselineRedisBeginCommit(b *testing.B, client redis.UniversalClient) func(i int) error {
	ctx := context.Background()
	prefix := benchRedisPrefix(b, client) + "bench:0::"
	fp := benchReq.Fingerprint.Bytes()
	const token = "0123456789abcdef0123456789abcdef"
	const retention = int64(24 * time.Hour / time.Millisecond)
	const lease = int64(30 * time.Second / time.Millisecond)
	return func(i int) error {
		key := []string{prefix + "key-" + strconv.Itoa(i)}
		now := time.Now().UnixMilli()
		// A record as large as the store's: a 46-byte header, the
		// fingerprint, the token, the payload.
		rec := make([]byte, 0, 46+len(fp)+len(token)+len(benchReq.Payload))
		rec = append(rec, "IDM\x01p"...)
		rec = append(rec, make([]byte, 41)...)
		rec = append(append(append(rec, fp...), token...), benchReq.Payload...)
		if err := baselineBeginScript.Run(ctx, client, key, rec, now+lease, retention).Err(); err != nil {
			return err
		}
		return baselineCommitScript.Run(ctx, client, key, token, benchResult).Err()
	}
}

// runWorkers calls op(lo) … op(hi-1) from workers goroutines and returns
// the wall time taken. The first error fails b.
func runWorkers(b *testing.B, workers, lo, hi int, op func(i int) error) time.Duration {
	var next atomic.Int64
	next.Store(int64(lo))
	var failed sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= hi {
					return
				}
				if err := op(i); err != nil {
					failed.Do(func() { b.Error(err) })
					next.Store(int64(hi))
					return
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start)
}

// benchRedisClient returns a client of the server TEST_REDIS_URL names,
// with a connection per worker, or skips b.
func benchRedisClient(b *testing.B) *redis.Client {
	url := os.Getenv("TEST_REDIS_URL")
	if url == "" {
		b.Skip("TEST_REDIS_URL is not set")
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		b.Fatal(err)
	}
	opts.PoolSize = redisWorkers
	c := redis.NewClient(opts)
	b.Cleanup(func() { _ = c.Close() })
	return c
}

// benchRedisPrefix returns a new key prefix; its keys are deleted when b
// ends.
func benchRedisPrefix(b *testing.B, client redis.UniversalClient) string {
	var r [8]byte
	_, _ = rand.Read(r[:])
	prefix := "idembench:" + hex.EncodeToString(r[:]) + ":"
	b.Cleanup(func() {
		ctx := context.Background()
		iter := client.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		var batch []string
		flush := func() {
			if len(batch) > 0 {
				_ = client.Unlink(ctx, batch...).Err()
				batch = batch[:0]
			}
		}
		for iter.Next(ctx) {
			if batch = append(batch, iter.Val()); len(batch) == 1000 {
				flush()
			}
		}
		flush()
	})
	return prefix
}
