package tracker

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// started returns a started Tracker that is stopped when the test ends.
func started(t *testing.T, cfg Config) *Tracker {
	t.Helper()
	tr := New(cfg)
	tr.Start()
	t.Cleanup(tr.Stop)
	return tr
}

// TestReserveExactlyOneWinner pins T1: of N goroutines reserving one key at
// once, exactly one gets true; for Acquire too, and for many keys at once.
func TestReserveExactlyOneWinner(t *testing.T) {
	t.Parallel()
	const goroutines, keys = 64, 50
	tr := started(t, Config{})
	var wins [keys]atomic.Int32
	var ready, wg sync.WaitGroup
	ready.Add(1)
	for g := range goroutines {
		wg.Go(func() {
			ready.Wait() // start together
			for i := range keys {
				key := fmt.Sprintf("order-%d", i)
				if g%2 == 0 {
					if tr.Reserve("payments", key) {
						wins[i].Add(1)
					}
					continue
				}
				if tok, ok := tr.Acquire("payments", key); ok {
					wins[i].Add(1)
					if tok.IsZero() {
						t.Errorf("key %d: Acquire won with the zero Token", i)
					}
				}
			}
		})
	}
	ready.Done()
	wg.Wait()
	for i := range keys {
		if n := wins[i].Load(); n != 1 {
			t.Errorf("key %d: %d of %d goroutines won the reservation, want exactly 1", i, n, goroutines)
		}
	}
}

// TestCompleteKeepsKey pins the first half of T2: a completed key is Seen
// and cannot be reserved again, also when it was never reserved.
func TestCompleteKeepsKey(t *testing.T) {
	t.Parallel()
	tr := started(t, Config{})
	if !tr.Reserve("s", "k") {
		t.Fatal("first Reserve = false")
	}
	tr.Complete("s", "k")
	tr.Complete("s", "never-reserved")
	for _, key := range []string{"k", "never-reserved"} {
		if !tr.Seen("s", key) {
			t.Errorf("%s: Seen after Complete = false", key)
		}
		if tr.Reserve("s", key) {
			t.Errorf("%s: Reserve after Complete = true", key)
		}
	}
}

// TestReleaseFreesKey pins T3: after Release the next Reserve is true, from
// a reservation and from a completed key alike.
func TestReleaseFreesKey(t *testing.T) {
	t.Parallel()
	tr := started(t, Config{})
	tr.Reserve("s", "reserved")
	tr.Reserve("s", "completed")
	tr.Complete("s", "completed")
	for _, key := range []string{"reserved", "completed"} {
		tr.Release("s", key)
		if tr.Seen("s", key) {
			t.Errorf("%s: Seen after Release = true", key)
		}
		if !tr.Reserve("s", key) {
			t.Errorf("%s: Reserve after Release = false", key)
		}
	}
}

func TestScopesAreIndependent(t *testing.T) {
	t.Parallel()
	tr := started(t, Config{})
	if !tr.Reserve("tenant-a", "k") || !tr.Reserve("tenant-b", "k") {
		t.Fatal("the same key in two scopes conflicted")
	}
	tr.Release("tenant-a", "k")
	if !tr.Seen("tenant-b", "k") {
		t.Error("Release in one scope freed the key in another")
	}
	// The pair is the key, not the concatenation.
	if !tr.Reserve("ab", "c") || !tr.Reserve("a", "bc") {
		t.Error(`("ab", "c") and ("a", "bc") conflicted`)
	}
}

// TestNotStartedFailsOpen pins T5 for a Tracker never started, a stopped
// one and a nil one: Reserve true (every time), Seen false, the rest do
// nothing, nothing panics.
func TestNotStartedFailsOpen(t *testing.T) {
	t.Parallel()
	stopped := New(Config{})
	stopped.Start()
	stopped.Reserve("s", "k")
	stopped.Stop()

	for name, tr := range map[string]*Tracker{
		"never started": New(Config{}),
		"stopped":       stopped,
		"nil":           nil,
	} {
		t.Run(name, func(t *testing.T) {
			for i := range 2 {
				if !tr.Reserve("s", "k") {
					t.Errorf("Reserve #%d = false, want true (fail open)", i+1)
				}
				tok, ok := tr.Acquire("s", "k")
				if !ok || !tok.IsZero() {
					t.Errorf("Acquire #%d = %v, %v; want the zero Token, true", i+1, tok, ok)
				}
			}
			if !tr.ReserveOwned("s", "k", Token{n: 1}) {
				t.Error("ReserveOwned = false, want true (fail open)")
			}
			tr.Complete("s", "k")
			if tr.Seen("s", "k") {
				t.Error("Seen = true, want false")
			}
			if tr.CompleteOwned("s", "k", Token{n: 1}) || tr.ReleaseOwned("s", "k", Token{n: 1}) {
				t.Error("CompleteOwned or ReleaseOwned reported a change")
			}
			tr.Release("s", "k")
			tr.Reset()
			if tr.Len() != 0 {
				t.Errorf("Len = %d, want 0", tr.Len())
			}
			tr.Stop()
			if err := tr.Close(); err != nil {
				t.Errorf("Close = %v", err)
			}
		})
	}
}

func TestStartStopLifecycle(t *testing.T) {
	t.Parallel()
	tr := New(Config{})
	tr.Start()
	tr.Start() // no second sweeper (goleak would see it)
	tr.Reserve("s", "k")
	tr.Stop()
	tr.Stop()
	if err := tr.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if tr.Len() != 0 {
		t.Errorf("a stopped tracker holds %d keys, want 0", tr.Len())
	}
	tr.Start()
	defer tr.Close()
	if !tr.Reserve("s", "k") {
		t.Error("after a restart, Reserve of a key held before Stop = false")
	}
	if tr.Reserve("s", "k") {
		t.Error("a restarted tracker does not track keys")
	}
}

func TestResetForgetsEveryKey(t *testing.T) {
	t.Parallel()
	tr := started(t, Config{})
	for i := range 100 {
		tr.Reserve("s", fmt.Sprint(i))
	}
	tr.Complete("s", "done")
	tr.Reset()
	if tr.Len() != 0 {
		t.Fatalf("Len after Reset = %d", tr.Len())
	}
	if !tr.Reserve("s", "done") || !tr.Reserve("s", "7") {
		t.Error("a key survived Reset")
	}
}

// TestRetryWithTokenBypassesReservation: the owner's retry passes; anyone
// else, including the zero Token, is a duplicate.
func TestRetryWithTokenBypassesReservation(t *testing.T) {
	t.Parallel()
	tr := started(t, Config{})
	tok, ok := tr.Acquire("s", "k")
	if !ok || tok.IsZero() {
		t.Fatalf("Acquire = %v, %v", tok, ok)
	}
	other, _ := tr.Acquire("s", "other")
	for _, tc := range []struct {
		name string
		tok  Token
		want bool
	}{
		{"owner's first retry", tok, true},
		{"owner's second retry", tok, true},
		{"another reservation's token", other, false},
		{"zero token", Token{}, false},
	} {
		if got := tr.ReserveOwned("s", "k", tc.tok); got != tc.want {
			t.Errorf("%s: ReserveOwned = %v, want %v", tc.name, got, tc.want)
		}
	}
	if tr.Reserve("s", "k") {
		t.Error("Reserve of a key held by a retrying owner = true")
	}
	if !tr.CompleteOwned("s", "k", tok) {
		t.Fatal("owner's CompleteOwned = false")
	}
	if tr.ReserveOwned("s", "k", tok) {
		t.Error("ReserveOwned of a completed key = true")
	}
}

func TestOwnedTransitionsCheckTheOwner(t *testing.T) {
	t.Parallel()
	tr := started(t, Config{})
	tok, _ := tr.Acquire("s", "k")
	other, _ := tr.Acquire("s", "other")
	if tr.ReleaseOwned("s", "k", other) || tr.ReleaseOwned("s", "k", Token{}) {
		t.Error("ReleaseOwned with a token that does not own the key freed it")
	}
	if tr.CompleteOwned("s", "k", other) || tr.CompleteOwned("s", "k", Token{}) {
		t.Error("CompleteOwned with a token that does not own the key completed it")
	}
	if !tr.Seen("s", "k") {
		t.Fatal("the reservation is gone")
	}
	if !tr.ReleaseOwned("s", "k", tok) {
		t.Fatal("owner's ReleaseOwned = false")
	}
	if tr.ReleaseOwned("s", "k", tok) {
		t.Error("second ReleaseOwned = true")
	}
	if !tr.CompleteOwned("s", "free", Token{}) {
		t.Error("CompleteOwned of a free key = false")
	}
	tr.Complete("s", "done")
	if tr.ReleaseOwned("s", "done", tok) {
		t.Error("ReleaseOwned freed a completed key")
	}
}

func TestNewRejectsInvalidConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg   Config
		field string
	}{
		{Config{TTL: -time.Second}, "Config.TTL"},
		{Config{TTL: maxTTL + 1}, "Config.TTL"},
		{Config{SweepInterval: -1}, "Config.SweepInterval"},
		{Config{Shards: 3}, "Config.Shards"},
		{Config{Shards: -4}, "Config.Shards"},
		{Config{Shards: maxShards * 2}, "Config.Shards"},
	} {
		func() {
			defer func() {
				err, _ := recover().(error)
				if err == nil || !strings.Contains(err.Error(), tc.field) {
					t.Errorf("New(%+v) panicked with %v, want an error naming %s", tc.cfg, err, tc.field)
				}
			}()
			New(tc.cfg)
		}()
	}
}

func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	tr := New(Config{})
	if got := time.Duration(tr.ttl); got != time.Hour {
		t.Errorf("default TTL = %v, want 1h", got)
	}
	if tr.interval != 15*time.Minute {
		t.Errorf("default SweepInterval = %v, want 15m", tr.interval)
	}
	n := len(tr.shards)
	if n < minShards || n&(n-1) != 0 {
		t.Errorf("default Shards = %d, want a power of two >= %d", n, minShards)
	}
	tr = New(Config{TTL: time.Minute, Shards: 1})
	if tr.interval != 15*time.Second || len(tr.shards) != 1 {
		t.Errorf("TTL 1m, Shards 1: SweepInterval %v, %d shards", tr.interval, len(tr.shards))
	}
	// A tiny TTL does not have the sweeper spin.
	if tr = New(Config{TTL: 3}); tr.interval != time.Millisecond {
		t.Errorf("TTL 3ns: SweepInterval %v, want 1ms", tr.interval)
	}
}

func TestShardFillsOneCacheLine(t *testing.T) {
	t.Parallel()
	if size := unsafe.Sizeof(shard{}); size != 64 {
		t.Errorf("shard is %d bytes, want 64", size)
	}
}

// TestCallsDoNotAllocate: once a key's map slot exists, the hot path
// allocates nothing.
func TestCallsDoNotAllocate(t *testing.T) {
	tr := started(t, Config{})
	tr.Reserve("s", "warm")
	allocs := testing.AllocsPerRun(1000, func() {
		tr.Release("s", "warm")
		tr.Reserve("s", "warm")
		tr.Complete("s", "warm")
		tr.Seen("s", "warm")
	})
	if allocs != 0 {
		t.Errorf("Release+Reserve+Complete+Seen allocate %.1f times, want 0", allocs)
	}
}

func TestCompletedTellsDoneFromReserved(t *testing.T) {
	tr := started(t, Config{})
	if tr.Completed("s", "k") {
		t.Fatal("a free key is completed")
	}
	tok, ok := tr.Acquire("s", "k")
	if !ok {
		t.Fatal("Acquire failed")
	}
	if tr.Completed("s", "k") {
		t.Fatal("a reserved key is completed")
	}
	if !tr.CompleteOwned("s", "k", tok) || !tr.Completed("s", "k") {
		t.Fatal("a completed key is not Completed")
	}
	var nilTracker *Tracker
	if nilTracker.Completed("s", "k") {
		t.Fatal("a nil tracker reports Completed")
	}
}

// TestSweepRebuildsShrunkenMaps checks when a sweep replaces a shard's map
// (which Go never shrinks) by a fresh one holding the live keys: when the
// sweep leaves it under a quarter of the most keys it held, expired or
// released since, and that peak reached shrinkFloor; never a small map, nor
// one still near its peak, nor the fresh map again at the next sweep.
func TestSweepRebuildsShrunkenMaps(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		gone, live  int
		release     bool // the gone keys are released instead of expiring
		wantRebuilt bool
	}{
		{"small map emptied", shrinkFloor - 1, 0, false, false},
		{"map at the floor emptied", shrinkFloor, 0, false, true},
		{"a quarter left", 3 * shrinkFloor, shrinkFloor, false, false},
		{"under a quarter left", 3*shrinkFloor + 1, shrinkFloor - 1, false, true},
		{"released, not expired", 2 * shrinkFloor, 1, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var now atomic.Int64
			tr := started(t, Config{TTL: time.Hour, Shards: 1, Now: func() time.Time {
				return time.Unix(0, now.Load())
			}})
			for i := range tc.gone {
				tr.Complete("gone", fmt.Sprint(i))
			}
			now.Add(int64(30 * time.Minute))
			var toks []Token
			for i := range tc.live {
				tok, _ := tr.Acquire("live", fmt.Sprint(i))
				toks = append(toks, tok)
			}
			if tc.release {
				for i := range tc.gone {
					tr.Release("gone", fmt.Sprint(i))
				}
			} else {
				now.Add(int64(40 * time.Minute)) // the gone keys expire
			}

			s := &tr.shards[0]
			before := reflect.ValueOf(s.keys).Pointer()
			tr.sweep()
			rebuilt := reflect.ValueOf(s.keys).Pointer() != before
			if rebuilt != tc.wantRebuilt {
				t.Errorf("%d of %d keys left: rebuilt = %v, want %v", tc.live, tc.gone+tc.live, rebuilt, tc.wantRebuilt)
			}
			if n := tr.Len(); n != tc.live {
				t.Fatalf("Len = %d after the sweep, want %d", n, tc.live)
			}
			for i, tok := range toks {
				if !tr.ReserveOwned("live", fmt.Sprint(i), tok) || tr.Reserve("live", fmt.Sprint(i)) {
					t.Fatalf("live key %d lost its reservation or its owner", i)
				}
			}
			after := reflect.ValueOf(s.keys).Pointer()
			tr.sweep()
			if reflect.ValueOf(s.keys).Pointer() != after {
				t.Error("a sweep that deleted nothing rebuilt the map")
			}
		})
	}
}

// TestClockFarFromFirstReading checks a Config.Now whose readings lie
// further from its first one than int64 nanoseconds reach (about 292
// years), such as a fake clock that starts at the zero Time and is then set
// to a real date: every write (Reserve, Complete, ReserveOwned,
// CompleteOwned) still holds its key for the TTL, where a deadline that
// wrapped negative used to leave every key free at once.
func TestClockFarFromFirstReading(t *testing.T) {
	t.Parallel()
	date := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name        string
		first, then time.Time
	}{
		{"zero Time, then a date", time.Time{}, date},
		{"a date, then 300 years later", date, date.AddDate(300, 0, 0)},
		{"a date, then the zero Time", date, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var now atomic.Pointer[time.Time]
			now.Store(&tc.first)
			tr := started(t, Config{TTL: time.Hour, Now: func() time.Time { return *now.Load() }})
			now.Store(&tc.then)

			if !tr.Reserve("s", "reserved") || tr.Reserve("s", "reserved") {
				t.Error("Reserve: the key was free again at once")
			}
			// Reserved at once: the whole TTL, also where time stands still
			// and the reservation never lapses.
			if d, ok := tr.Reserved("s", "reserved"); !ok || d != time.Hour {
				t.Errorf("Reserved = %v, %v; want the TTL, true", d, ok)
			}
			tr.Complete("s", "done")
			if !tr.Completed("s", "done") || tr.Reserve("s", "done") {
				t.Error("Complete: the key was not kept")
			}
			tok, ok := tr.Acquire("s", "owned")
			if !ok || !tr.ReserveOwned("s", "owned", tok) || tr.Reserve("s", "owned") {
				t.Error("ReserveOwned: the key was free again at once")
			}
			if !tr.CompleteOwned("s", "owned", tok) || !tr.Completed("s", "owned") {
				t.Error("CompleteOwned: the key was not kept")
			}
		})
	}
}

// TestDefaultShards checks the default Config.Shards: four per GOMAXPROCS
// rounded up to a power of two, at least minShards and at most maxShards,
// so that the zero Config stays valid on a machine of any size.
func TestDefaultShards(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ procs, want int }{
		{1, minShards},
		{4, minShards},
		{5, 32},
		{8, 32},
		{12, 64},
		{maxShards / 4, maxShards},
		{maxShards/4 + 1, maxShards},
		{20000, maxShards},
		{1 << 30, maxShards},
	} {
		if got := defaultShards(tc.procs); got != tc.want {
			t.Errorf("GOMAXPROCS %d: %d shards, want %d", tc.procs, got, tc.want)
		}
		cfg := Config{Shards: defaultShards(tc.procs)}
		if err := cfg.withDefaults().validate(); err != nil {
			t.Errorf("GOMAXPROCS %d: the default config is invalid: %v", tc.procs, err)
		}
	}
}

// Keys spread over every shard, whether or not their scope equals the
// key: a hash of the two that cancels out when they are equal would leave
// half the shards, or all but one, unused.
func TestKeysSpreadOverEveryShard(t *testing.T) {
	t.Parallel()
	tr := New(Config{Shards: 64})
	for name, k := range map[string]func(i int) scopedKey{
		"scope equals key": func(i int) scopedKey { s := strconv.Itoa(i); return scopedKey{scope: s, key: s} },
		"no scope":         func(i int) scopedKey { return scopedKey{key: strconv.Itoa(i)} },
		"one scope":        func(i int) scopedKey { return scopedKey{scope: "tenant", key: strconv.Itoa(i)} },
	} {
		used := map[*shard]bool{}
		for i := range 10_000 {
			used[tr.shardOf(k(i))] = true
		}
		if len(used) != len(tr.shards) {
			t.Errorf("%s: 10,000 keys used %d of %d shards", name, len(used), len(tr.shards))
		}
	}
}
