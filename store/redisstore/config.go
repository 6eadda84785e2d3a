package redisstore

import (
	"errors"
	"fmt"
	"time"

	"github.com/idemgo/idem"
)

// DefaultPrefix is the key prefix a Store uses when Config.Prefix is empty.
const DefaultPrefix = "idem:"

// Config configures a Store. The zero Config is valid.
type Config struct {
	// Prefix is put in front of every Redis key the store reads or writes,
	// so that the store can share a database with other data. Records of
	// namespace ns live under Prefix+ns+":". Stores that share a database
	// need prefixes none of which begins with another ("idem:a:" and
	// "idem:b:", not "idem:" and "idem:orders:"): otherwise a record of one
	// can have the Redis key of a record of the other, and one's
	// PurgeExpired deletes the other's expired records. A prefix holding a
	// hash tag ("{idem}:") puts every record in one Redis Cluster hash
	// slot, which the store does not need. Defaults to DefaultPrefix
	// ("idem:").
	Prefix string
	// Retention is how long a record is kept after Begin: its expires_at is
	// Begin's time plus Retention, and Redis evicts the key that much later.
	// It is kept to the millisecond, rounded up. Defaults to
	// idem.DefaultRetention.
	Retention time.Duration
	// Lease is how long a Fresh reservation is owned before another Begin
	// may take it over, and how far Heartbeat extends it by default. It is
	// kept to the millisecond, rounded up. Defaults to idem.DefaultLease.
	Lease time.Duration
	// MaxPayload is the largest request payload, result or encoded stored
	// error accepted, in bytes. Larger ones are rejected with a
	// *idem.PayloadTooLargeError before anything is sent to Redis. Defaults
	// to idem.DefaultMaxPayload; at most MaxMaxPayload.
	MaxPayload int
	// AutoPipeline sends the store's calls through the client's blocking
	// auto-pipeliner (go-redis's AutoPipeline), so that calls made at the
	// same time from many goroutines share one write and one read instead
	// of paying a round trip of system calls each. Under concurrency it
	// about halves the CPU time per call, on the client and on the server;
	// a lone caller sees the same latency. PurgeExpired still uses the
	// client itself. Not for a *redis.Ring, which has no auto-pipeliner:
	// New then fails. The auto-pipeliner does not watch a call's context:
	// it holds the call until its batch is done, which, while the server
	// does not answer, the client's timeouts do not bound. So a call whose
	// context ends first returns then, with the context's error, leaving
	// its command in the batch (it may still take effect: a Begin's
	// reservation is then released as its answer comes) and a goroutine
	// waiting for the batch. The auto-pipeliner is the client's one,
	// shared with its other users (go-redis caches one per client):
	// closing it, rather than the client, elsewhere fails the store's
	// calls.
	// go-redis marks AutoPipeline experimental, so it is off by default;
	// idem proxy turns it on.
	AutoPipeline bool
	// Now is the clock every decision is taken by: lease and record expiry
	// are compared with Now, never with the Redis server's clock. Defaults
	// to time.Now.
	Now func() time.Time
}

// MaxMaxPayload is the largest Config.MaxPayload: a record holds its
// request payload and its result (or error) in one string, which Redis
// caps at 512 MiB (proto-max-bulk-len), header included.
const MaxMaxPayload = 256<<20 - 1024

// validate checks c and fills in the defaults.
func (c *Config) validate() error {
	switch {
	case c.Retention < 0:
		return errors.New("redisstore: Config.Retention must not be negative")
	case c.Lease < 0:
		return errors.New("redisstore: Config.Lease must not be negative")
	case c.MaxPayload < 0:
		return errors.New("redisstore: Config.MaxPayload must not be negative")
	case c.MaxPayload > MaxMaxPayload:
		return fmt.Errorf("redisstore: Config.MaxPayload must be at most %d (MaxMaxPayload), as a record holds a payload and a result in one Redis string of at most 512 MiB", MaxMaxPayload)
	}
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if c.Retention == 0 {
		c.Retention = idem.DefaultRetention
	}
	if c.Lease == 0 {
		c.Lease = idem.DefaultLease
	}
	if c.MaxPayload == 0 {
		c.MaxPayload = idem.DefaultMaxPayload
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}

// after returns the time d after t in Unix milliseconds, rounded up, so
// that a retention or lease is never shorter than asked for. Any duration
// up to math.MaxInt64 (292 years, a way of saying "for good") gives a time
// that far ahead; none wraps around into the past.
func after(t time.Time, d time.Duration) int64 {
	end := t.Add(d)
	ms := end.UnixMilli()
	if end.After(time.UnixMilli(ms)) {
		ms++
	}
	return ms
}
