package tracker

import (
	"fmt"
	"math/bits"
	"runtime"
	"time"
)

// Config configures a Tracker. The zero value is valid: every field has a
// default.
type Config struct {
	// TTL is how long a key is tracked: a completed key for TTL after its
	// last Complete, a reservation for TTL after it was taken (or its owner
	// last called ReserveOwned); a reservation neither completed nor released
	// by then counts as abandoned and the key is free again.
	//
	// Defaults to 1 hour; at most 100 years.
	TTL time.Duration

	// SweepInterval is how often the sweeper deletes expired keys. Whether a
	// key has expired is decided from its stored deadline on every call, so
	// the interval only bounds how long an expired key keeps its memory: at
	// most TTL + SweepInterval after it was last refreshed. The sweep also
	// gives back the memory a shard's map kept from a burst of keys that
	// have since expired or been released.
	//
	// Defaults to TTL/4, and to at least a millisecond, so that a tiny TTL
	// does not have the sweeper spin. Set, it must be at least a millisecond
	// too: a shorter one would have the sweeper burn a core locking every
	// shard in turn against the calls, and is refused with a *ConfigError.
	SweepInterval time.Duration

	// Shards is how many independently locked partitions hold the keys. It
	// must be a power of two, at most 65536; more shards means less lock
	// contention between cores.
	//
	// Defaults to four per GOMAXPROCS, rounded up to a power of two, at
	// least 16 and at most 65536.
	Shards int

	// Now returns the current time; tests inject a fake clock here. The
	// tracker counts time from Now's first reading (in New) in int64
	// nanoseconds: a reading more than about 292 years later counts as
	// that bound, where the tracker's time stands still; a key reserved or
	// completed at such a reading never expires (Release, Reset and Stop
	// still drop it).
	//
	// Now is called by every method, from the caller's goroutine, and by
	// the sweeper, from its own: it must be safe for concurrent use. Its
	// readings may go backwards (a wall clock stepped back): each call
	// judges a key by its own reading, so a key that had expired counts
	// again while the readings are before its deadline, unless a sweep
	// deleted it meanwhile, which it does not undo.
	//
	// Defaults to time.Now.
	Now func() time.Time
}

const (
	defaultTTL = time.Hour
	maxTTL     = 100 * 365 * 24 * time.Hour // keeps every deadline within an int64
	minShards  = 16
	// minSweep is the least SweepInterval, set or default.
	minSweep  = time.Millisecond
	maxShards = 1 << 16
)

// withDefaults returns c with every zero field set to its default, except
// Now: the Tracker reads the default clock itself, more cheaply.
func (c Config) withDefaults() Config {
	if c.TTL == 0 {
		c.TTL = defaultTTL
	}
	if c.SweepInterval == 0 && c.TTL > 0 {
		c.SweepInterval = max(c.TTL/4, minSweep)
	}
	if c.Shards == 0 {
		c.Shards = defaultShards(runtime.GOMAXPROCS(0))
	}
	return c
}

// defaultShards returns the default Config.Shards for procs GOMAXPROCS:
// four per proc rounded up to a power of two, within [minShards, maxShards].
func defaultShards(procs int) int {
	n := 4 * min(procs, maxShards/4)
	return max(minShards, 1<<bits.Len(uint(n-1)))
}

// validate reports the first invalid field of a config whose defaults have
// been applied, as a *ConfigError.
func (c Config) validate() error {
	switch {
	case c.TTL < 0 || c.TTL > maxTTL:
		return configErrorf("Config.TTL", "must be between 0 and %v, got %v", maxTTL, c.TTL)
	case c.SweepInterval < 0:
		return configErrorf("Config.SweepInterval", "must not be negative, got %v", c.SweepInterval)
	case c.SweepInterval < minSweep:
		return configErrorf("Config.SweepInterval", "must be 0 (the default) or at least %v, got %v", minSweep, c.SweepInterval)
	case c.Shards < 0 || c.Shards > maxShards || c.Shards&(c.Shards-1) != 0:
		return configErrorf("Config.Shards", "must be a power of two between 1 and %d, got %d", maxShards, c.Shards)
	}
	return nil
}

// ConfigError reports a field of a Config that NewChecked rejected; New
// panics with it.
type ConfigError struct {
	// Field names the field at fault as a Go expression: "Config.TTL".
	Field string
	// Problem says what is wrong with it, as a phrase that follows the
	// field's name ("must not be negative, got -1s").
	Problem string
}

func (e *ConfigError) Error() string { return "tracker: " + e.Field + " " + e.Problem }

// configErrorf returns a *ConfigError for field.
func configErrorf(field, format string, args ...any) error {
	return &ConfigError{Field: field, Problem: fmt.Sprintf(format, args...)}
}
