package memstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/store/memstore"
)

// TestPurgeMatchesAScan runs random Begins (with retentions of their own
// or shared), commits, releases, heartbeats, clock moves (some
// backwards) and purges against a model that scans every record, and
// checks that each purge deletes exactly the records the scan finds
// expired, and that the records it keeps still answer.
func TestPurgeMatchesAScan(t *testing.T) {
	rapid.Check(t, purgeMatchesAScan)
}

// TestPurgeMatchesAScanWhileCompacting is TestPurgeMatchesAScan with the
// expiry items compacted at nearly every write, as they are once released
// and replaced records leave more items than there are records.
func TestPurgeMatchesAScanWhileCompacting(t *testing.T) {
	defer memstore.SetCompactSlack(0)()
	rapid.Check(t, purgeMatchesAScan)
}

// purgeMatchesAScan is the property of TestPurgeMatchesAScan.
func purgeMatchesAScan(rt *rapid.T) {
	ctx := context.Background()
	now := time.Unix(1_700_000_000, 0)
	s, err := memstore.New(memstore.Config{Now: func() time.Time { return now }, Lease: 2 * time.Second})
	if err != nil {
		rt.Fatal(err)
	}
	ns := idem.MustNamespace("purge")
	req := idem.Request{Fingerprint: idem.FingerprintBytes([]byte("r"))}
	type rec struct {
		expires time.Time
		lease   idem.Lease
		done    bool
	}
	model := map[string]*rec{} // by key value, with scope "s" or none
	keyOf := func(name string) idem.Key {
		k, err := idem.ParseKey(ns, name[1:])
		if err != nil {
			rt.Fatal(err)
		}
		if name[0] == 's' {
			k, _ = k.WithScope("scope")
		}
		return k
	}
	names := rapid.SampledFrom([]string{"-a", "-b", "-c", "sa", "sb", "-d", "-e", "sf"})
	for range rapid.IntRange(1, 200).Draw(rt, "steps") {
		switch rapid.IntRange(0, 6).Draw(rt, "op") {
		case 0, 1: // Begin
			name := names.Draw(rt, "key")
			retention := time.Duration(rapid.SampledFrom([]int{1000, 5000}).Draw(rt, "retention ms")+rapid.IntRange(0, 3).Draw(rt, "retention offset ms")) * time.Millisecond
			o, err := s.Begin(ctx, keyOf(name), req, &idem.BeginOpts{Retention: retention})
			if err != nil {
				rt.Fatal(err)
			}
			if o.Kind == idem.Fresh { // kept for the retention, and at least for the lease
				model[name] = &rec{expires: later(now.Add(retention), o.Lease.ExpiresAt), lease: o.Lease}
			}
		case 2: // Commit
			name := names.Draw(rt, "key")
			if r := model[name]; r != nil && !r.done && now.Before(r.expires) {
				if err := s.Commit(ctx, keyOf(name), r.lease, []byte(`1`)); err != nil {
					rt.Fatalf("Commit %s: %v", name, err)
				}
				r.done = true
			}
		case 3: // FailTransient: the record goes
			name := names.Draw(rt, "key")
			if r := model[name]; r != nil && !r.done && now.Before(r.expires) {
				if err := s.FailTransient(ctx, keyOf(name), r.lease); err != nil {
					rt.Fatalf("FailTransient %s: %v", name, err)
				}
				delete(model, name)
			}
		case 6: // Heartbeat: the record lives at least as long as its lease
			name := names.Draw(rt, "key")
			extend := time.Duration(rapid.SampledFrom([]int{1000, 7000}).Draw(rt, "extend ms")+rapid.IntRange(0, 3).Draw(rt, "extend offset ms")) * time.Millisecond
			if r := model[name]; r != nil && !r.done && now.Before(r.expires) {
				if _, err := s.Heartbeat(ctx, keyOf(name), r.lease, extend); err != nil {
					rt.Fatalf("Heartbeat %s: %v", name, err)
				}
				r.expires = later(r.expires, now.Add(extend))
			}
		case 4: // the clock moves, now and then backwards
			now = now.Add(time.Duration(rapid.IntRange(-1000, 3000).Draw(rt, "ms")) * time.Millisecond)
		case 5: // purge
			want := 0
			for name, r := range model {
				if !r.expires.After(now) {
					want++
					delete(model, name)
				}
			}
			got, err := s.PurgeExpired(ctx, ns, now)
			if err != nil {
				rt.Fatal(err)
			}
			if got != want {
				rt.Fatalf("PurgeExpired at %v deleted %d, a scan finds %d expired", now, got, want)
			}
			for name := range model {
				if _, err := s.Get(ctx, keyOf(name)); err != nil {
					rt.Fatalf("Get %s after the purge: %v", name, err)
				}
			}
		}
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// BenchmarkPurge: one purge of a store holding n records of which a tenth
// have expired, as a periodic purge finds it. It costs about the expired
// records, not the store.
func BenchmarkPurge(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			ctx := context.Background()
			ns := idem.MustNamespace("purge")
			req := idem.Request{Fingerprint: idem.FingerprintBytes([]byte("r"))}
			now := time.Unix(1_700_000_000, 0)
			s, _ := memstore.New(memstore.Config{Now: func() time.Time { return now }, Retention: time.Duration(n) * time.Millisecond})
			i := 0
			begin := func() {
				k, _ := idem.ParseKey(ns, fmt.Sprint("k", i))
				i++
				now = now.Add(time.Millisecond)
				if _, err := s.Begin(ctx, k, req, nil); err != nil {
					b.Fatal(err)
				}
			}
			for range n {
				begin()
			}
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				for range n / 10 {
					begin()
				}
				b.StartTimer()
				if _, err := s.PurgeExpired(ctx, ns, now); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestPurgeCostIgnoresRetentions: a purge that finds nothing expired costs
// about the same whether the records were written with one retention or
// each with its own (a retention computed per call, "until the end of
// the day", or a Heartbeat's extend). Expiry was kept in a queue per
// retention, which every purge visited: with a retention per record, each
// purge walked them all, holding the store's lock.
func TestPurgeCostIgnoresRetentions(t *testing.T) {
	const records = 50_000
	ctx := context.Background()
	ns := idem.MustNamespace("purge")
	req := idem.Request{Fingerprint: idem.FingerprintBytes([]byte("r"))}
	now := time.Unix(1_700_000_000, 0)
	// fastestPurge is the quickest of several purges, each finding nothing
	// expired, of a store holding records whose retentions are
	// time.Hour+i%distinct milliseconds: the quickest, so that a pause of
	// the test's goroutine does not count.
	fastestPurge := func(distinct int) time.Duration {
		s, err := memstore.New(memstore.Config{Now: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		for i := range records {
			k, _ := idem.ParseKey(ns, fmt.Sprint("k", i))
			retention := time.Hour + time.Duration(i%distinct)*time.Millisecond
			if _, err := s.Begin(ctx, k, req, &idem.BeginOpts{Retention: retention}); err != nil {
				t.Fatal(err)
			}
		}
		fastest := time.Duration(1<<63 - 1)
		for range 50 {
			start := time.Now()
			if n, err := s.PurgeExpired(ctx, ns, now); err != nil || n != 0 {
				t.Fatalf("PurgeExpired = %d, %v; want nothing expired", n, err)
			}
			fastest = min(fastest, time.Since(start))
		}
		return fastest
	}
	one, each := fastestPurge(1), fastestPurge(records)
	// Walking 50,000 queues takes thousands of times longer than looking
	// at the front of one; a purge whose cost is that of the records it
	// deletes takes about the same in both.
	if each > 20*one+20*time.Microsecond {
		t.Errorf("a purge finding nothing took %v with a retention per record, %v with one retention: it walks every record", each, one)
	}
}
