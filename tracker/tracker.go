package tracker

import (
	"hash/maphash"
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
)

// Tracker remembers which keys, per scope, are being processed (reserved)
// or have been processed (completed), for a TTL. See the package
// documentation for the contract.
//
// The zero Tracker is ready to use, as one from New(Config{}) is: it fails
// open until Start, and then tracks keys with the defaults of every Config
// field. A Tracker must not be copied after first use.
type Tracker struct {
	id       uint64 // from trackerIDs: in every Token t mints
	ttl      int64  // nanoseconds
	interval time.Duration
	now      func() time.Time // Config.Now; nil means time.Now
	epoch    time.Time
	seed     maphash.Seed
	mask     uint64 // len(shards) - 1
	shards   []shard

	running atomic.Bool // set between Start and Stop; unset means fail open

	lifecycle sync.Mutex // serialises Start and Stop
	stop      chan struct{}
	done      chan struct{}

	// setup applies the Config, once: NewChecked's, or the defaults on the
	// first Start, Len or Reset of a zero Tracker.
	setup sync.Once
}

// New returns a Tracker configured by cfg. It is not started: until Start is
// called it fails open, as every method documents.
//
// New panics with a *ConfigError naming the field if cfg is invalid: use it
// for a Config written in the program, and NewChecked for one that comes
// from configuration or other input.
func New(cfg Config) *Tracker {
	t, err := NewChecked(cfg)
	if err != nil {
		panic(err)
	}
	return t
}

// NewChecked is New for a Config that may be invalid: it returns a nil
// Tracker and a *ConfigError naming the first invalid field, and never
// panics.
func NewChecked(cfg Config) (*Tracker, error) {
	t := new(Tracker)
	var err error
	t.setup.Do(func() { err = t.configure(cfg) })
	if err != nil {
		return nil, err
	}
	return t, nil
}

// configure applies cfg to a zero t, or returns why it cannot; it runs
// once per Tracker, under t.setup.
func (t *Tracker) configure(cfg Config) error {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return err
	}
	t.id = trackerIDs.Add(1)
	t.ttl = int64(cfg.TTL)
	t.interval = cfg.SweepInterval
	t.now = cfg.Now // nil for the default, time.Now
	t.epoch = time.Now()
	if t.now != nil {
		t.epoch = t.now()
	}
	t.seed = maphash.MakeSeed()
	t.mask = uint64(cfg.Shards - 1)
	t.shards = make([]shard, cfg.Shards)
	for i := range t.shards {
		t.shards[i].keys = make(map[scopedKey]entry)
		t.shards[i].id = uint64(i)
	}
	return nil
}

// configured makes sure t is configured: a zero Tracker gets the defaults.
// Every method that reads t's configuration calls it first, or checks that
// t is started, which Start sets only after calling it.
func (t *Tracker) configured() {
	t.setup.Do(func() { _ = t.configure(Config{}) }) // the defaults are valid
}

// started reports whether t is a started Tracker; every method of a nil or
// unstarted Tracker fails open.
func (t *Tracker) started() bool {
	return t != nil && t.running.Load()
}

// clock returns the current time as nanoseconds since t.epoch, on the
// monotonic clock when Now provides one. With the default clock it reads
// only the monotonic clock (time.Since), which costs half of time.Now.
//
// A Now reading further from the epoch than an int64 reaches saturates (in
// Sub), and clock keeps it below math.MaxInt64, so that a deadline from it,
// which saturates at math.MaxInt64 (see deadline), is still in the future.
func (t *Tracker) clock() int64 {
	if t.now == nil {
		return int64(time.Since(t.epoch))
	}
	return min(int64(t.now().Sub(t.epoch)), math.MaxInt64-1)
}

// deadline returns when a key stored at now expires: now + TTL, or
// math.MaxInt64 where that would overflow.
func (t *Tracker) deadline(now int64) int64 {
	if now > math.MaxInt64-t.ttl {
		return math.MaxInt64
	}
	return now + t.ttl
}

// lockRunning locks the shard of k and returns it, or returns nil, locking
// nothing, if t has been stopped meanwhile: a write that found t started
// must not leave a key in it once Stop, which clears running before it
// empties the shards, has returned.
func (t *Tracker) lockRunning(k scopedKey) *shard {
	s := t.shardOf(k)
	s.mu.Lock()
	if !t.running.Load() {
		s.mu.Unlock()
		return nil
	}
	return s
}

// shardOf returns the shard of k. The scope's hash is rotated before it is
// mixed in, so that the two do not cancel out when the scope equals the
// key (x ^ x*odd has its low bits, which pick the shard, mostly zero).
func (t *Tracker) shardOf(k scopedKey) *shard {
	h := maphash.String(t.seed, k.key) ^ bits.RotateLeft64(maphash.String(t.seed, k.scope), 32)
	return &t.shards[h&t.mask]
}

// Reserve atomically reserves key in scope. It returns true if the caller
// now owns the key and should proceed, false if the key is already reserved
// or completed (a duplicate: do not run it). Of any number of simultaneous
// Reserves of a free key exactly one returns true.
//
// Fail-open: Reserve returns true on a nil or unstarted Tracker.
func (t *Tracker) Reserve(scope, key string) bool {
	_, ok := t.Acquire(scope, key)
	return ok
}

// Complete marks key in scope as processed: it stays tracked (Seen true,
// Reserve false) for the TTL from now, whether or not it was reserved
// before; completing a completed key refreshes its TTL.
//
// Complete is a no-op on a nil or unstarted Tracker.
func (t *Tracker) Complete(scope, key string) {
	if !t.started() {
		return
	}
	now := t.clock()
	s := t.lockRunning(scopedKey{scope, key})
	if s == nil {
		return
	}
	s.put(scopedKey{scope, key}, entry{deadline: t.deadline(now)})
	s.mu.Unlock()
}

// Release forgets key in scope, reserved or completed, so that the next
// Reserve succeeds: call it when processing failed terminally, so that a
// genuinely new submission can run. Release does not check ownership; see
// ReleaseOwned for that.
//
// Release is a no-op on a nil or unstarted Tracker.
func (t *Tracker) Release(scope, key string) {
	if !t.started() {
		return
	}
	k := scopedKey{scope, key}
	s := t.shardOf(k)
	s.mu.Lock()
	delete(s.keys, k)
	s.mu.Unlock()
}

// Seen reports whether key in scope is reserved or completed and has not
// expired.
//
// Seen returns false on a nil or unstarted Tracker.
func (t *Tracker) Seen(scope, key string) bool {
	e, ok, now := t.lookup(scope, key)
	return ok && e.live(now)
}

// lookup returns the entry of key in scope, if any, as it is now, and
// the tracker's time then; ok is false on a nil or unstarted Tracker.
func (t *Tracker) lookup(scope, key string) (e entry, ok bool, now int64) {
	if !t.started() {
		return entry{}, false, 0
	}
	now = t.clock()
	k := scopedKey{scope, key}
	s := t.shardOf(k)
	s.mu.Lock()
	e, ok = s.keys[k]
	s.mu.Unlock()
	return e, ok, now
}

// Completed reports whether key was completed and is still kept (Seen, and
// not merely reserved). A consumer that lost a Reserve uses it to tell a
// duplicate of handled work (acknowledge it) from a concurrent delivery
// still running (leave it for redelivery).
//
// Fail-open: Completed returns false on a nil or unstarted Tracker.
func (t *Tracker) Completed(scope, key string) bool {
	e, ok, now := t.lookup(scope, key)
	return ok && e.live(now) && e.owner == 0
}

// Reserved reports whether key in scope is reserved (Seen, and not
// completed), and if so how long its reservation has left before it lapses
// and the key is free again: a duration in (0, TTL], counted from when the
// reservation was taken or its owner last refreshed it with ReserveOwned.
// The owner may complete or release the key sooner, or refresh it again. A
// consumer that lost a Reserve uses it to tell how long to put the
// redelivery off.
//
// Reserved returns 0 and false for a key that is free, completed, released
// or lapsed, and on a nil or unstarted Tracker. It never reports more than
// the TTL: not for a Config.Now that went backwards since the reservation
// was taken, and not for one taken where the tracker's time stands still
// (see Config.Now), which never lapses.
func (t *Tracker) Reserved(scope, key string) (time.Duration, bool) {
	e, ok, now := t.lookup(scope, key)
	if !ok || !e.live(now) || e.owner == 0 {
		return 0, false
	}
	if e.deadline == math.MaxInt64 {
		return time.Duration(t.ttl), true // taken where the tracker's time stands still: never lapses
	}
	// now < deadline, so the difference is positive and fits in a uint64
	// even where an int64 would overflow (a Now far behind the epoch).
	rest := uint64(e.deadline) - uint64(now)
	return time.Duration(min(rest, uint64(t.ttl))), true
}

// Len returns how many keys the tracker holds, counting expired ones the
// sweeper has not deleted yet. It is meant for tests and metrics.
//
// Len returns 0 on a nil Tracker.
func (t *Tracker) Len() int {
	if t == nil {
		return 0
	}
	t.configured()
	n := 0
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		n += len(s.keys)
		s.mu.Unlock()
	}
	return n
}

// Reset forgets every key. It is meant for tests.
func (t *Tracker) Reset() {
	if t == nil {
		return
	}
	t.configured()
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		clear(s.keys)
		s.mu.Unlock()
	}
}
