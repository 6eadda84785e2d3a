package bench

import (
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgo/idem/tracker"
)

// parallelFor calls body(i) for every i in [lo, hi) on GOMAXPROCS
// goroutines, which take indices in chunks from a shared counter, and
// returns the wall time. Both sides of a comparison run through it, so they
// pay the same harness cost.
func parallelFor(lo, hi int, body func(i int)) time.Duration {
	const chunk = 256
	next := atomic.Int64{}
	next.Store(int64(lo))
	var wg sync.WaitGroup
	start := time.Now()
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for {
				from := int(next.Add(chunk)) - chunk
				if from >= hi {
					return
				}
				for i := from; i < min(from+chunk, hi); i++ {
					body(i)
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start)
}

// interleave measures own against baseline over the operations [0, b.N),
// taking turns every round operations, and reports the metrics reportRatio
// reports: "x-baseline" (own time per op over the baseline's; below 1 means
// faster) and "baseline-ns/op", with "ns/op", "B/op" and "allocs/op" being
// own's alone. On a shared machine the load drifts within a second; taking
// turns exposes both sides to the same drift, where measuring one after the
// other would not. Each function runs operations [lo, hi) and returns the
// time they took, which may leave out set-up it does first.
//
// b's timer runs throughout, so that the framework sizes b.N to both sides
// together; toggling it per round would stop the world to read memory
// statistics every time.
func interleave(b *testing.B, round int, own, baseline func(lo, hi int) time.Duration) {
	b.Helper()
	var ownTime, baseTime time.Duration
	var objects, bytes uint64
	b.ResetTimer()
	for lo := 0; lo < b.N; lo += round {
		hi := min(lo+round, b.N)
		o0, b0 := heapAllocs()
		ownTime += own(lo, hi)
		o1, b1 := heapAllocs()
		objects, bytes = objects+o1-o0, bytes+b1-b0
		baseTime += baseline(lo, hi)
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(ownTime.Nanoseconds())/n, "ns/op")
	b.ReportMetric(float64(objects)/n, "allocs/op")
	b.ReportMetric(float64(bytes)/n, "B/op")
	b.ReportMetric(float64(baseTime.Nanoseconds())/n, "baseline-ns/op")
	if baseTime > 0 {
		b.ReportMetric(float64(ownTime)/float64(baseTime), "x-baseline")
	}
}

// heapAllocs returns how many heap objects and bytes the program has
// allocated so far, read without stopping the world. Objects count as
// testing.B counts them: tiny objects, which the runtime packs into shared
// blocks, one by one.
func heapAllocs() (objects, bytes uint64) {
	s := []metrics.Sample{
		{Name: "/gc/heap/allocs:objects"},
		{Name: "/gc/heap/tiny/allocs:objects"},
		{Name: "/gc/heap/allocs:bytes"},
	}
	metrics.Read(s)
	return s[0].Value.Uint64() + s[1].Value.Uint64(), s[2].Value.Uint64()
}

// trackerRound is how many keys each side of the tracker benchmark takes
// per turn, into a structure of its own.
const trackerRound = 1 << 18

// trackerKeys returns trackerRound distinct (scope, key) pairs, as
// trackerRound/2^16 scopes and 2^16 keys.
func trackerKeys() (scopes, names []string) {
	names = make([]string, 1<<16)
	for i := range names {
		names[i] = "msg-" + strconv.Itoa(i)
	}
	scopes = make([]string, trackerRound>>16)
	for i := range scopes {
		scopes[i] = "consumer-" + strconv.Itoa(i)
	}
	return scopes, names
}

type syncMapKey struct{ scope, key string }

// Values stored in the sync.Map baseline: pointers to two fixed entries, so
// that storing them allocates nothing.
var reservedMark, completedMark = new(int), new(int)

// BenchmarkTrackerReserveComplete: a fresh key reserved and completed, per
// op, on GOMAXPROCS goroutines (run with -cpu=1,2). Baseline: sync.Map
// LoadOrStore then Store on the same keys.
//
// The sides take turns of trackerRound keys, each turn into a new tracker
// or sync.Map on a heap just collected of the other side's, so each side
// pays for its own garbage collection only (sync.Map allocates for every
// key, the tracker does not) and both meet the same drift in the machine's
// load.
func BenchmarkTrackerReserveComplete(b *testing.B) {
	scopes, names := trackerKeys()
	b.ReportAllocs()
	interleave(b, trackerRound, func(lo, hi int) time.Duration {
		tr := tracker.New(tracker.Config{})
		tr.Start()
		defer tr.Stop()
		runtime.GC()
		return parallelFor(lo, hi, func(i int) {
			i -= lo
			scope, key := scopes[i>>16], names[i&(1<<16-1)]
			if !tr.Reserve(scope, key) {
				panic("fresh key reserved twice")
			}
			tr.Complete(scope, key)
		})
	}, func(lo, hi int) time.Duration {
		var m sync.Map
		runtime.GC()
		return parallelFor(lo, hi, func(i int) {
			i -= lo
			k := syncMapKey{scopes[i>>16], names[i&(1<<16-1)]}
			if _, loaded := m.LoadOrStore(k, reservedMark); loaded {
				panic("fresh key stored twice")
			}
			m.Store(k, completedMark)
		})
	})
}
