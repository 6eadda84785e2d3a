package bench

import (
	"runtime"
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
// alternating between them every few thousand operations, and reports the
// ratio the way reportRatio does ("x-baseline": own time per op over the
// baseline's, below 1 means faster; "baseline-ns/op"). On a shared machine
// the load drifts within a second; taking turns exposes both sides to the
// same drift, where measuring one after the other would not. Each function
// runs operations [lo, hi) and returns the time they took; b's timer counts
// only own.
func interleave(b *testing.B, own, baseline func(lo, hi int) time.Duration) {
	b.Helper()
	const round = 1 << 13
	var ownTime, baseTime time.Duration
	b.ResetTimer()
	for lo := 0; lo < b.N; lo += round {
		hi := min(lo+round, b.N)
		ownTime += own(lo, hi)
		b.StopTimer()
		baseTime += baseline(lo, hi)
		b.StartTimer()
	}
	b.StopTimer()
	if baseTime > 0 {
		b.ReportMetric(float64(ownTime)/float64(baseTime), "x-baseline")
	}
	b.ReportMetric(float64(baseTime.Nanoseconds())/float64(b.N), "baseline-ns/op")
}

// trackerKeys returns n distinct (scope, key) pairs built from 2^16 key
// strings and n/2^16+1 scope strings, so that a run of ten million
// operations does not first build ten million strings.
func trackerKeys(n int) (scopes, names []string) {
	const perScope = 1 << 16
	names = make([]string, perScope)
	for i := range names {
		names[i] = "msg-" + strconv.Itoa(i)
	}
	scopes = make([]string, n/perScope+1)
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
// Both sides keep every key, so their heaps grow with b.N, and sync.Map
// allocates for every key where the tracker does not. The sides therefore
// run one after the other, each on a heap collected of the other's keys
// (reportRatio), so that each pays for its own garbage collection only;
// interleaving them would bill the tracker for sync.Map's collections.
func BenchmarkTrackerReserveComplete(b *testing.B) {
	scopes, names := trackerKeys(b.N)
	tr := tracker.New(tracker.Config{})
	tr.Start()
	runtime.GC()
	b.ReportAllocs()
	b.ResetTimer()
	parallelFor(0, b.N, func(i int) {
		scope, key := scopes[i>>16], names[i&(1<<16-1)]
		if !tr.Reserve(scope, key) {
			panic("fresh key reserved twice")
		}
		tr.Complete(scope, key)
	})
	b.StopTimer()
	tr.Stop() // drops the keys
	reportRatio(b, func(n int) time.Duration {
		var m sync.Map
		runtime.GC()
		return parallelFor(0, n, func(i int) {
			k := syncMapKey{scopes[i>>16], names[i&(1<<16-1)]}
			if _, loaded := m.LoadOrStore(k, reservedMark); loaded {
				panic("fresh key stored twice")
			}
			m.Store(k, completedMark)
		})
	})
}
