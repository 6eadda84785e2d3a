package tracker

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"testing"
	"time"
)

// TestZeroTrackerIsUsable: a Tracker declared without New fails open until
// started, as one from New, and once started tracks keys with the default
// Config.
func TestZeroTrackerIsUsable(t *testing.T) {
	t.Parallel()
	var tr Tracker
	if !tr.Reserve("s", "k") || tr.Seen("s", "k") || tr.Len() != 0 {
		t.Fatal("an unstarted zero Tracker does not fail open")
	}
	tr.Reset()
	tr.Start()
	defer tr.Stop()
	if time.Duration(tr.ttl) != defaultTTL || tr.interval != defaultTTL/4 || len(tr.shards) != defaultShards(runtime.GOMAXPROCS(0)) {
		t.Errorf("zero Tracker: TTL %v, SweepInterval %v, %d shards; want the defaults",
			time.Duration(tr.ttl), tr.interval, len(tr.shards))
	}
	tok, ok := tr.Acquire("s", "k")
	if !ok || tok.IsZero() || tr.Reserve("s", "k") || !tr.Seen("s", "k") || tr.Len() != 1 {
		t.Fatal("a started zero Tracker does not track keys")
	}
	if !tr.CompleteOwned("s", "k", tok) || !tr.Completed("s", "k") {
		t.Error("CompleteOwned on a zero Tracker failed")
	}
	tr.Stop()
	if tr.Seen("s", "k") {
		t.Error("a stopped zero Tracker kept its keys")
	}
}

// TestZeroTrackerConcurrentFirstUse: the first Start of a zero Tracker may
// race with Len and Reset (run with -race).
func TestZeroTrackerConcurrentFirstUse(t *testing.T) {
	t.Parallel()
	var tr Tracker
	var wg sync.WaitGroup
	wg.Go(tr.Start)
	wg.Go(func() { _ = tr.Len() })
	wg.Go(tr.Reset)
	wg.Go(func() { tr.Reserve("s", "k") })
	wg.Wait()
	tr.Stop()
}

// TestNewCheckedRejectsInvalidConfig: NewChecked returns the error New
// panics with, a *ConfigError naming the field, and never panics.
func TestNewCheckedRejectsInvalidConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg   Config
		field string
		text  string
	}{
		{Config{TTL: -time.Second}, "Config.TTL", "tracker: Config.TTL must be between 0 and 876000h0m0s, got -1s"},
		{Config{TTL: maxTTL + 1}, "Config.TTL", "tracker: Config.TTL must be between 0 and 876000h0m0s, got 876000h0m0.000000001s"},
		{Config{SweepInterval: -1}, "Config.SweepInterval", "tracker: Config.SweepInterval must not be negative, got -1ns"},
		{Config{Shards: 3}, "Config.Shards", "tracker: Config.Shards must be a power of two between 1 and 65536, got 3"},
		{Config{Shards: -4}, "Config.Shards", "tracker: Config.Shards must be a power of two between 1 and 65536, got -4"},
		{Config{Shards: math.MinInt}, "Config.Shards", fmt.Sprintf("tracker: Config.Shards must be a power of two between 1 and 65536, got %d", math.MinInt)},
		{Config{Shards: maxShards * 2}, "Config.Shards", "tracker: Config.Shards must be a power of two between 1 and 65536, got 131072"},
	} {
		tr, err := NewChecked(tc.cfg)
		var ce *ConfigError
		if tr != nil || !errors.As(err, &ce) || ce.Field != tc.field || err.Error() != tc.text {
			t.Errorf("NewChecked(%+v) = %v, %v; want nil and a *ConfigError %q", tc.cfg, tr, err, tc.text)
		}
	}
	tr, err := NewChecked(Config{TTL: time.Minute, Shards: 4})
	if err != nil || time.Duration(tr.ttl) != time.Minute || len(tr.shards) != 4 {
		t.Fatalf("NewChecked of a valid Config = %v", err)
	}
}

// TestSweepIntervalBelowFloorIsRefused: an explicit SweepInterval shorter
// than a millisecond, which would have the sweeper spin, locking every
// shard in turn against the calls, is refused with a *ConfigError; a
// millisecond, the floor of the default too, is accepted.
func TestSweepIntervalBelowFloorIsRefused(t *testing.T) {
	t.Parallel()
	for _, d := range []time.Duration{time.Nanosecond, time.Microsecond, time.Millisecond - 1} {
		tr, err := NewChecked(Config{SweepInterval: d})
		var ce *ConfigError
		if tr != nil || !errors.As(err, &ce) || ce.Field != "Config.SweepInterval" {
			t.Errorf("NewChecked(SweepInterval %v): Tracker made %t, error %v; want none and a *ConfigError for Config.SweepInterval", d, tr != nil, err)
		}
	}
	tr, err := NewChecked(Config{SweepInterval: time.Millisecond})
	if err != nil || tr.interval != time.Millisecond {
		t.Fatalf("NewChecked(SweepInterval 1ms) = %v; want it accepted", err)
	}
}
