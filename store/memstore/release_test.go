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
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
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
		before := heap()
		for i := range attempts {
			o, err := s.Begin(ctx, k, idem.Request{Fingerprint: fp, Payload: payload(i)}, nil)
			if err != nil || o.Kind != idem.Fresh {
				t.Fatalf("%s: Begin %d = %v, %v; want fresh", c.name, i, o.Kind, err)
			}
			if err := c.after(k, o.Lease); err != nil {
				t.Fatal(err)
			}
		}
		if grew := int64(heap()) - int64(before); grew > 4*size {
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
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
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
		before := heap()
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
		if grew := int64(heap()) - int64(before); grew > 1<<20 {
			t.Errorf("%s: after %d Begins released at once the heap grew by %d KiB, want next to nothing", c.name, attempts, grew>>10)
		}
		runtime.KeepAlive(s)
	}
}
