package memstore_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/store/memstore"
)

// TestReleasedPayloadsAreFreed pins that a record released by
// FailTransient, or replaced by a takeover, lets its request payload go at
// once, not when its retention would have ended: a client retrying a
// failing request (the HTTP middleware releases the key on a 5xx) must not
// make the store hold one copy of the body per attempt for a day.
func TestReleasedPayloadsAreFreed(t *testing.T) {
	ctx := context.Background()
	const (
		attempts = 32
		size     = 1 << 20
	)
	now := time.Now()
	s, err := memstore.New(memstore.Config{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	ns := idem.MustNamespace("release")
	fp := idem.FingerprintBytes([]byte("retried"))
	payload := func(i int) []byte {
		return []byte(`"` + strings.Repeat(string(rune('a'+i%26)), size) + `"`)
	}
	for _, c := range []struct {
		name  string
		after func(k idem.Key, l idem.Lease) error
	}{
		{"FailTransient", func(k idem.Key, l idem.Lease) error { return s.FailTransient(ctx, k, l) }},
		{"Takeover", func(idem.Key, idem.Lease) error { now = now.Add(idem.DefaultLease); return nil }},
	} {
		k, err := idem.ParseKey(ns, c.name)
		if err != nil {
			t.Fatal(err)
		}
		before := heapAlloc()
		for i := range attempts {
			o, err := s.Begin(ctx, k, idem.Request{Fingerprint: fp, Payload: payload(i)}, nil)
			if err != nil || o.Kind != idem.Fresh {
				t.Fatalf("%s: Begin %d = %v, %v; want fresh", c.name, i, o.Kind, err)
			}
			if err := c.after(k, o.Lease); err != nil {
				t.Fatal(err)
			}
		}
		if grew := int64(heapAlloc()) - int64(before); grew > 4*size {
			t.Errorf("%s: after %d Begins of %d-byte payloads the heap grew by %d MiB, want what is gone freed",
				c.name, attempts, size, grew>>20)
		}
	}
	runtime.KeepAlive(s)
}

// TestReleasedKeysDoNotPileUp pins that the memory a store holds follows
// the records it keeps, not the Begins it answered: a key reserved and
// released again and again (a client retrying a request that keeps
// failing) leaves nothing behind each time, even before any PurgeExpired,
// with a clock that moves and with one that stands still.
func TestReleasedKeysDoNotPileUp(t *testing.T) {
	ctx := context.Background()
	const attempts = 200_000
	ns := idem.MustNamespace("retries")
	req := idem.Request{Fingerprint: idem.FingerprintBytes([]byte("retried"))}
	for _, c := range []struct {
		name string
		tick time.Duration
		keys int
	}{{"moving clock", time.Millisecond, 3}, {"still clock", 0, 1}} {
		now := time.Now()
		s, err := memstore.New(memstore.Config{Now: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		keys := make([]idem.Key, c.keys)
		for i := range keys {
			if keys[i], err = idem.ParseKey(ns, fmt.Sprintf("a-key-that-keeps-failing-%d", i)); err != nil {
				t.Fatal(err)
			}
		}
		before := heapAlloc()
		for i := range attempts {
			k := keys[i%len(keys)]
			o, err := s.Begin(ctx, k, req, nil)
			if err != nil || o.Kind != idem.Fresh {
				t.Fatalf("%s: Begin %d = %v, %v; want fresh", c.name, i, o.Kind, err)
			}
			if err := s.FailTransient(ctx, k, o.Lease); err != nil {
				t.Fatal(err)
			}
			now = now.Add(c.tick)
		}
		if grew := int64(heapAlloc()) - int64(before); grew > 1<<20 {
			t.Errorf("%s: after %d Begins released at once the heap grew by %d KiB, want next to nothing", c.name, attempts, grew>>10)
		}
		runtime.KeepAlive(s)
	}
}

// TestPurgedBurstIsGivenBack pins that the memory of a burst of records
// is given back once they are purged, or released and their expiry
// passed, while the store keeps a few records of each retention: the map
// of records and the expiry heap shrink with them, so that a proxy that
// once took a burst of traffic does not hold its peak for good.
func TestPurgedBurstIsGivenBack(t *testing.T) {
	ctx := context.Background()
	const burst = 200_000
	ns := idem.MustNamespace("burst")
	req := idem.Request{Fingerprint: idem.FingerprintBytes([]byte("r"))}
	for _, release := range []bool{false, true} {
		now := time.Unix(1_700_000_000, 0)
		s, err := memstore.New(memstore.Config{Now: func() time.Time { return now }, Retention: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		begin := func(name string, i int, opts *idem.BeginOpts) (idem.Key, idem.Lease) {
			k, err := idem.ParseKey(ns, fmt.Sprint(name, i))
			if err != nil {
				t.Fatal(err)
			}
			o, err := s.Begin(ctx, k, req, opts)
			if err != nil || o.Kind != idem.Fresh {
				t.Fatalf("Begin %s%d = %v, %v; want fresh", name, i, o.Kind, err)
			}
			return k, o.Lease
		}
		before := heapAlloc()
		keys, leases := make([]idem.Key, burst), make([]idem.Lease, burst)
		for i := range burst { // all in flight at once
			keys[i], leases[i] = begin("burst-", i, nil)
		}
		for i := range burst {
			if release { // all released, before any purge
				if err := s.FailTransient(ctx, keys[i], leases[i]); err != nil {
					t.Fatal(err)
				}
			}
		}
		now = now.Add(30 * time.Second)
		for i := range 10 { // live after the purge: with the burst's retention, and with one of their own
			begin("steady-", i, nil)
			begin("long-", i, &idem.BeginOpts{Retention: time.Hour})
		}
		now = now.Add(40 * time.Second)
		want := burst
		if release {
			want = 0
		}
		if n, err := s.PurgeExpired(ctx, ns, now); err != nil || n != want {
			t.Fatalf("release %v: PurgeExpired = %d, %v; want %d", release, n, err, want)
		}
		if grew := int64(heapAlloc()) - int64(before); grew > 1<<20 {
			t.Errorf("release %v: after %d records went and 20 were kept the heap is %d KiB larger than before them, want the burst given back",
				release, burst, grew>>10)
		}
		runtime.KeepAlive(s)
	}
}

// heapAlloc is the heap in use after a collection.
func heapAlloc() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
