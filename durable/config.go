package durable

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"os"
	"time"

	"github.com/idemgo/idem/internal/pgstorable"
)

// Config configures a Client. A nil or zero Config makes a client that can
// insert, signal, inspect and migrate, but not Start: running steps needs
// FSMs and Queues.
type Config struct {
	// ID names this engine in the rows it leases (lease_owner) and in
	// telemetry. It must be unique among the engines sharing a database,
	// and text PostgreSQL stores (valid UTF-8 without NUL), as must the
	// keys of ConcurrencyLimits and RateLimits.
	// Defaults to the host name, the process id and random hex.
	ID string

	// FSMs are the FSM definitions this engine runs, each *FSM[S]. Rows of
	// other FSMs, or other versions, picked from its queues are retried
	// with backoff (ErrUnknownFSM). Two definitions with one name and
	// version are an error.
	FSMs []Definition

	// Queues are the queues this engine picks from, by name, each with its
	// concurrency. Required for Start.
	Queues map[string]QueueConfig

	// ConcurrencyLimits raises or lowers, by key prefix, how many instances
	// of one concurrency key (InsertOpts.ConcurrencyKey) may execute at
	// once, across all engines; a key takes the limit of the longest
	// prefix of it in the map ("tenant:" covers "tenant:42"; the empty
	// prefix covers every key), and a key no prefix covers has a limit of
	// one. The limit applies to each key, not to the prefix as a whole.
	// Limits must be at least 1. Engines sharing a database should use the
	// same limits: each leases up to the limit it knows.
	ConcurrencyLimits map[string]int

	// RateLimits configures, by name, the token buckets that instances
	// name in InsertOpts.RateLimit ("name", or "name:partition" for a
	// bucket of its own per partition): how fast each refills and how many
	// tokens it holds. The picker leases a row that names a bucket only
	// when the bucket holds the row's weight in tokens, taken as it leases
	// it; the buckets live in the database, shared by every engine on it.
	// A row naming a name missing here is not picked, and is reported to
	// Hooks.RateLimitUnknown. Names are 1–255 bytes without ':'. Engines
	// sharing a database should use the same limits. Defaults to none.
	RateLimits map[string]RateLimit

	// PollInterval is how often each queue's picker looks for runnable
	// rows when nothing woke it earlier, and how often expired await
	// deadlines are looked for. A row scheduled for later, and an await
	// deadline, do not wait for it once the engine knows of them (see the
	// package documentation). Defaults to 1s.
	PollInterval time.Duration

	// PollOnly turns the LISTEN/NOTIFY wake-up hints off. Inserts and
	// signals always send a NOTIFY on the "durable_wakeup" channel, and
	// inserts and retries of rows eligible later one on "durable_due";
	// unless PollOnly is set, a started engine holds one connection of
	// the pool that LISTENs for them and wakes the queue's picker at once,
	// or arms its timer for when the row is eligible. With PollOnly, rows
	// made by other processes are learnt at the picker's next claim, its
	// next poll at the latest. The engine is correct without the hints:
	// they only cut latency. Defaults to false.
	PollOnly bool

	// LeaseTTL is how long a claimed row stays leased to this engine
	// without a heartbeat. When a lease expires the reaper of any engine
	// returns the row to runnable with its attempt increased, and the
	// outcome of the step that held it is no longer committed. A running
	// step whose lease no heartbeat extends for LeaseTTL (the database is
	// unreachable, or a caller's transaction, SignalTx or CancelTx, holds
	// the row's lock that long) has its context cancelled, with cause
	// ErrLeaseLost, once the lease may have lapsed. At least 1µs, the
	// resolution leases are stored at. Defaults to 30s.
	LeaseTTL time.Duration

	// HeartbeatInterval is how often the leases of the rows this engine
	// holds are extended by LeaseTTL. It must be below LeaseTTL. Defaults
	// to LeaseTTL/3.
	HeartbeatInterval time.Duration

	// ReaperInterval is how often this engine looks for expired leases.
	// Defaults to HeartbeatInterval.
	ReaperInterval time.Duration

	// MaxReaps is how many times in a row an instance's lease may expire
	// (its step hangs past the lease, or its engine dies, each time it
	// runs, with no outcome committed in between) before the reaper fails
	// the instance instead of running it again, with an Error beginning
	// with ErrReapedTooOften. A negative value sets no limit. Defaults to
	// DefaultMaxReaps (25).
	MaxReaps int

	// GCRetention is how long done, failed and cancelled rows are kept
	// after they finished, for inspection and to keep correlation keys
	// whose scope includes their status reserved; a row cancelled while
	// its step ran is kept, however long ago, until that step has returned
	// or its lease has expired. A negative value keeps them forever.
	// Defaults to 24h.
	GCRetention time.Duration

	// GCInterval is how often this engine collects terminal rows past
	// GCRetention. Defaults to 1m.
	GCInterval time.Duration

	// GCBatch is how many rows one GC statement deletes, so that no
	// statement holds many locks or runs long; a pass repeats it until
	// fewer are left. Defaults to 1000.
	GCBatch int

	// MaxPayload is the largest JSON document, in bytes, that the client
	// writes: an instance's state (at insert and with every outcome a step
	// commits), a Done result and a signal's payload. Insert, InsertAll
	// and Signal reject a larger one with a *PayloadTooLargeError before
	// writing anything; a step whose new state or result is larger fails
	// with one, and its error handling decides (by default, retries and
	// then stops the instance, which keeps its last committed state). A
	// negative value sets no limit. Defaults to DefaultMaxPayload (1 MiB).
	// A number counts at the length PostgreSQL prints it back, without an
	// exponent: 1e131071 is 131072 bytes, so that a document no larger
	// than the limit as sent is no larger as read back.
	MaxPayload int

	// Logger receives the engine's errors and notable events. Defaults to
	// slog.Default().
	Logger *slog.Logger

	// Hooks receive telemetry events; one that panics is logged and
	// recovered (see Hooks). Defaults to none.
	Hooks Hooks
}

// QueueConfig configures one queue of an engine.
type QueueConfig struct {
	// Concurrency is how many steps of the queue this engine runs at once.
	// Required: at least 1, and with Prefetch at most math.MaxInt32.
	Concurrency int

	// Prefetch is how many rows beyond Concurrency the picker may claim
	// ahead, so that a worker that frees up finds a row at once. Claimed
	// rows that have not started are handed back when the engine stops.
	// Concurrency + Prefetch must be at most math.MaxInt32. Defaults to 0.
	Prefetch int
}

// DefaultMaxPayload is the default of Config.MaxPayload: 1 MiB.
const DefaultMaxPayload = 1 << 20

// The defaults.
const (
	defaultPollInterval = time.Second
	defaultLeaseTTL     = 30 * time.Second
	defaultGCRetention  = 24 * time.Hour
	defaultGCInterval   = time.Minute
	defaultGCBatch      = 1000
)

// fsmKey identifies a definition.
type fsmKey struct {
	name    string
	version int
}

// validate checks c, fills in the defaults and returns the definitions by
// name and version. Its messages name the field.
func (c *Config) validate() (map[fsmKey]Definition, error) {
	switch {
	case c.PollInterval < 0:
		return nil, configErrorf("Config.PollInterval", "must not be negative, got %s", c.PollInterval)
	case c.LeaseTTL < 0:
		return nil, configErrorf("Config.LeaseTTL", "must not be negative, got %s", c.LeaseTTL)
	case c.LeaseTTL > 0 && c.LeaseTTL < time.Microsecond:
		// Leases are stored to the microsecond: a shorter one expires as
		// it is taken, and its HeartbeatInterval may round to zero.
		return nil, configErrorf("Config.LeaseTTL", "must be at least 1µs, got %s", c.LeaseTTL)
	case c.HeartbeatInterval < 0:
		return nil, configErrorf("Config.HeartbeatInterval", "must not be negative, got %s", c.HeartbeatInterval)
	case c.ReaperInterval < 0:
		return nil, configErrorf("Config.ReaperInterval", "must not be negative, got %s", c.ReaperInterval)
	case c.GCInterval < 0:
		return nil, configErrorf("Config.GCInterval", "must not be negative, got %s", c.GCInterval)
	case c.GCBatch < 0:
		return nil, configErrorf("Config.GCBatch", "must not be negative, got %d", c.GCBatch)
	}
	if c.ID == "" {
		c.ID = defaultID()
	}
	if err := pgstorable.Text(c.ID); err != nil { // every lease names it
		return nil, configErrorf("Config.ID", "%q %v", c.ID, err)
	}
	if c.PollInterval == 0 {
		c.PollInterval = defaultPollInterval
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = defaultLeaseTTL
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = c.LeaseTTL / 3
	}
	if c.HeartbeatInterval >= c.LeaseTTL {
		return nil, configErrorf("Config.HeartbeatInterval", "(%s) must be below Config.LeaseTTL (%s)", c.HeartbeatInterval, c.LeaseTTL)
	}
	if c.ReaperInterval == 0 {
		c.ReaperInterval = c.HeartbeatInterval
	}
	if c.MaxReaps == 0 {
		c.MaxReaps = DefaultMaxReaps
	}
	if c.GCRetention == 0 {
		c.GCRetention = defaultGCRetention
	}
	if c.GCInterval == 0 {
		c.GCInterval = defaultGCInterval
	}
	if c.GCBatch == 0 {
		c.GCBatch = defaultGCBatch
	}
	if c.MaxPayload == 0 {
		c.MaxPayload = DefaultMaxPayload
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.Hooks.guard(c.Logger)
	for name, q := range c.Queues {
		if err := checkQueueName(name); err != nil {
			return nil, configErrorf(fmt.Sprintf("Config.Queues[%q]", name), "is not a valid queue: the name %v", err)
		}
		if q.Concurrency < 1 || q.Concurrency > math.MaxInt32 {
			return nil, configErrorf(fmt.Sprintf("Config.Queues[%q].Concurrency", name), "must be 1 to %d, got %d", math.MaxInt32, q.Concurrency)
		}
		// A claim takes up to Concurrency + Prefetch rows, a count its
		// statements take as a 32-bit integer.
		if q.Prefetch < 0 || q.Prefetch > math.MaxInt32-q.Concurrency {
			return nil, configErrorf(fmt.Sprintf("Config.Queues[%q].Prefetch", name), "must be 0 to %d (with Concurrency, at most %d), got %d",
				math.MaxInt32-q.Concurrency, math.MaxInt32, q.Prefetch)
		}
	}
	c.ConcurrencyLimits = maps.Clone(c.ConcurrencyLimits) // the caller's map stays the caller's
	for p, n := range c.ConcurrencyLimits {
		if n < 1 || n > math.MaxInt32 {
			return nil, configErrorf(fmt.Sprintf("Config.ConcurrencyLimits[%q]", p), "must be 1 to %d, got %d", math.MaxInt32, n)
		}
		if err := pgstorable.Text(p); err != nil { // every claim sends it
			return nil, configErrorf(fmt.Sprintf("Config.ConcurrencyLimits[%q]", p), "is not a valid prefix: %v", err)
		}
	}
	rls, err := validateRateLimits(c.RateLimits)
	if err != nil {
		return nil, err
	}
	c.RateLimits = rls
	defs := make(map[fsmKey]Definition, len(c.FSMs))
	for _, d := range c.FSMs {
		if d == nil || d.isNil() {
			return nil, configErrorf("Config.FSMs", "holds a nil definition (NewFSM's result when it failed?)")
		}
		m := d.meta()
		k := fsmKey{m.name, m.version}
		if _, dup := defs[k]; dup {
			return nil, configErrorf("Config.FSMs", "holds FSM %q version %d twice", m.name, m.version)
		}
		defs[k] = d
	}
	return defs, nil
}

// defaultID is the default Config.ID: host, pid and 4 random bytes.
func defaultID() string {
	host, _ := os.Hostname()
	if host == "" {
		host = "engine"
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}
