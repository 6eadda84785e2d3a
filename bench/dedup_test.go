package bench

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/idemgo/idem/dedup"
	"github.com/zeebo/blake3"
)

// windowCapacity is the design's default window: 100,000 keys.
const windowCapacity = 100_000

// keyStream returns 2^20 keys of which 98 % are new and 2 % repeat a key
// seen up to a thousand keys earlier, which a window of windowCapacity still
// remembers. Read cyclically, the stream keeps its mix: a key met again
// after 2^20 others has long been evicted, so it is new again.
func keyStream() []dedup.Key {
	r := rand.New(rand.NewPCG(3, 98))
	keys := make([]dedup.Key, 1<<20)
	for i := range keys {
		if i >= 1000 && r.IntN(100) < 2 {
			keys[i] = keys[i-1-r.IntN(1000)]
			continue
		}
		binary.LittleEndian.PutUint64(keys[i][:8], r.Uint64())
		binary.LittleEndian.PutUint64(keys[i][8:], r.Uint64())
	}
	return keys
}

// BenchmarkWindowCheckAndRecord: one key checked and recorded, per op, 98 %
// of them new, on GOMAXPROCS goroutines sharing one window (run with
// -cpu=1,2). Baseline: golang-lru/v2 ContainsOrAdd on a cache of the same
// capacity, same keys.
func BenchmarkWindowCheckAndRecord(b *testing.B) {
	keys := keyStream()
	mask := len(keys) - 1
	w := dedup.NewWindow(windowCapacity)
	c, err := lru.New[dedup.Key, struct{}](windowCapacity)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	interleave(b, 1<<13, func(lo, hi int) time.Duration {
		return parallelFor(lo, hi, func(i int) {
			w.CheckAndRecord(keys[i&mask])
		})
	}, func(lo, hi int) time.Duration {
		return parallelFor(lo, hi, func(i int) {
			c.ContainsOrAdd(keys[i&mask], struct{}{})
		})
	})
}

// memoryEntries is the size at which both windows' memory is measured.
const memoryEntries = 1_000_000

func heapAlloc() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// fillKey returns the i-th of memoryEntries distinct keys, computed rather
// than stored, so that the keys themselves are not counted.
func fillKey(i int) dedup.Key {
	var k dedup.Key
	binary.LittleEndian.PutUint64(k[:8], uint64(i)*0x9e3779b97f4a7c15)
	binary.LittleEndian.PutUint64(k[8:], uint64(i))
	return k
}

// BenchmarkWindowMemory: one op fills a fresh window of a million keys;
// "bytes/entry" is the growth of the live heap (runtime.MemStats.HeapAlloc
// after a GC, before creating the window and after filling it) divided by
// the entries, and "baseline-bytes/entry" the same for golang-lru/v2.
func BenchmarkWindowMemory(b *testing.B) {
	var perEntry float64
	for range b.N {
		before := heapAlloc()
		w := dedup.NewWindow(memoryEntries)
		for i := range memoryEntries {
			w.CheckAndRecord(fillKey(i))
		}
		b.StopTimer()
		perEntry = float64(heapAlloc()-before) / memoryEntries
		runtime.KeepAlive(w)
		b.StartTimer()
	}
	b.StopTimer()

	before := heapAlloc()
	c, err := lru.New[dedup.Key, struct{}](memoryEntries)
	if err != nil {
		b.Fatal(err)
	}
	for i := range memoryEntries {
		c.ContainsOrAdd(fillKey(i), struct{}{})
	}
	basePerEntry := float64(heapAlloc()-before) / memoryEntries
	runtime.KeepAlive(c)

	b.ReportMetric(perEntry, "bytes/entry")
	b.ReportMetric(basePerEntry, "baseline-bytes/entry")
	b.ReportMetric(perEntry/basePerEntry, "x-baseline-bytes")
}

// BenchmarkDerive: one operation key derived, per op, for operations of
// several sizes. Baseline: blake3.Sum256 of the same bytes already laid out
// (session ‖ seq ‖ op), that is, the hash alone.
func BenchmarkDerive(b *testing.B) {
	session := [16]byte{0: 0xa5, 15: 0x5a}
	const seq = 1 << 40
	for _, size := range []int{0, 16, 40, 100, 1000, 4096} {
		op := make([]byte, size)
		for i := range op {
			op[i] = byte(i)
		}
		laidOut := make([]byte, 0, 24+size)
		laidOut = append(laidOut, session[:]...)
		laidOut = binary.LittleEndian.AppendUint64(laidOut, seq)
		laidOut = append(laidOut, op...)
		if want, got := blake3.Sum256(laidOut), dedup.Derive(session, seq, op); [16]byte(want[:16]) != got {
			b.Fatalf("op of %d bytes: Derive = %v, hash of the same bytes = %x", size, got, want[:16])
		}

		b.Run(fmt.Sprintf("op=%dB", size), func(b *testing.B) {
			var sink dedup.Key
			var sum [32]byte
			b.ReportAllocs()
			interleave(b, 256, func(lo, hi int) time.Duration {
				start := time.Now()
				for range hi - lo {
					sink = dedup.Derive(session, seq, op)
				}
				return time.Since(start)
			}, func(lo, hi int) time.Duration {
				start := time.Now()
				for range hi - lo {
					sum = blake3.Sum256(laidOut)
				}
				return time.Since(start)
			})
			runtime.KeepAlive(sink)
			runtime.KeepAlive(sum)
		})
	}
}
