package pgstore

import (
	"fmt"
	"time"

	"github.com/idemgo/idem"
)

// Config configures a Store. The zero Config is valid: every field has a
// default.
type Config struct {
	// Table is the name of the table holding the records, optionally
	// schema-qualified ("idem.records"). Each part is 1–48 bytes of lowercase
	// ASCII letters, digits and '_', not starting with a digit; anything else
	// is rejected by New, never quoted into SQL as is. Migrate creates the
	// table, an index named Table+"_purge_idx" and, for a qualified name,
	// the schema. Every process sharing the table must spell it the same
	// way (not "records" in one and "public.records" in another): the
	// transactional-mode key locks are derived from it. Defaults to
	// DefaultTable ("idempotency_record").
	Table string

	// Retention is how long a record is kept, and replayed, after Begin.
	// BeginOpts.Retention overrides it per call. Defaults to
	// idem.DefaultRetention (24h).
	Retention time.Duration

	// Lease is how long a Fresh reservation is owned before another Begin of
	// the same key and request may take it over. BeginOpts.Lease overrides
	// it per call; Heartbeat extends by it when asked to extend by 0. It is
	// also the RetryAfter of an InFlight answer given because another
	// transaction is writing the key right now. Defaults to
	// idem.DefaultLease (30s).
	Lease time.Duration

	// MaxPayload is the largest request payload, result or encoded stored
	// error accepted, in bytes; larger ones are rejected with
	// *idem.PayloadTooLargeError before anything is sent to the server. A
	// request payload is measured both as sent and as PostgreSQL's jsonb
	// prints it back, each number with an exponent spelled out in digits
	// (1e131071 counts 131072 bytes), so that no record is larger read
	// than the limit allows (but for the space jsonb prints after each
	// comma and colon). Defaults to idem.DefaultMaxPayload (4 MiB); at
	// most MaxMaxPayload.
	MaxPayload int

	// PurgeBatch is how many records PurgeExpired deletes per statement, so
	// that no statement holds many row locks or runs long. Defaults to 1000.
	PurgeBatch int

	// Pipeline makes the lease-mode calls of concurrent goroutines share
	// connections: calls waiting for a connection are sent together, each
	// still its own autocommitted statement, in PostgreSQL's pipeline mode,
	// so that a batch costs one write and one read on each side instead of
	// one round trip per call. Under concurrency this raises the pairs per
	// second a server and client pair can do (on a two-core machine, about
	// 1.5× plain statements on 32 connections); a lone caller sees the same
	// latency. Transactional mode (WithTx, WithSQLTx) is unaffected. The
	// batches use named prepared statements on their connection, whatever
	// the pool's query execution mode: behind a proxy that pools by
	// transaction without support for prepared statements, leave Pipeline
	// off.
	Pipeline bool

	// PipelineLanes is how many batches run at once, each on a connection
	// of the pool, with Pipeline. Defaults to 4.
	PipelineLanes int

	// PipelineDepth is the most calls one batch carries, with Pipeline.
	// Defaults to 16.
	PipelineDepth int

	// Now is the clock every timestamp is computed from, in Go, truncated to
	// the microsecond PostgreSQL keeps: the store never reads the server's
	// clock (no now() in its SQL), so that every process and every test
	// decides expiry from one notion of time. Defaults to time.Now.
	Now func() time.Time
}

// MaxMaxPayload is the largest Config.MaxPayload: a stored error is kept
// as jsonb, whose strings and containers PostgreSQL caps at 268435455
// bytes (256 MiB − 1), and a Get reads a record's request payload and
// result in one row, which it caps at 1 GiB. Beyond them the server
// refuses the write (a FailPermanent, after the effect has run) or the
// read, and the caller sees idem.ErrUnavailable instead of a
// *idem.PayloadTooLargeError before any I/O. A request payload is kept as
// jsonb too, whose binary form can take up to six times its text (an
// array of one-digit numbers), and whose arrays the server cannot build
// beyond 2^24 elements: a request of over 32 MiB may be refused by the
// server at Begin, before any effect.
const MaxMaxPayload = 256<<20 - 1024

// Defaults of Config fields.
const (
	defaultPurgeBatch    = 1000
	defaultPipelineLanes = 4
	defaultPipelineDepth = 16
)

// validate checks c, fills in the defaults and returns the parsed table
// name. Its messages name the field.
func (c *Config) validate() (table, error) {
	if c.Table == "" {
		c.Table = DefaultTable
	}
	t, err := parseTable(c.Table)
	if err != nil {
		return table{}, fmt.Errorf("pgstore: Config.Table: %w", err)
	}
	switch {
	case c.Retention < 0:
		return table{}, fmt.Errorf("pgstore: Config.Retention must not be negative, got %s", c.Retention)
	case c.Lease < 0:
		return table{}, fmt.Errorf("pgstore: Config.Lease must not be negative, got %s", c.Lease)
	case c.MaxPayload < 0:
		return table{}, fmt.Errorf("pgstore: Config.MaxPayload must not be negative, got %d", c.MaxPayload)
	case c.MaxPayload > MaxMaxPayload:
		return table{}, fmt.Errorf("pgstore: Config.MaxPayload must be at most %d (MaxMaxPayload), as PostgreSQL's jsonb holds at most 256 MiB; got %d", MaxMaxPayload, c.MaxPayload)
	case c.PurgeBatch < 0:
		return table{}, fmt.Errorf("pgstore: Config.PurgeBatch must not be negative, got %d", c.PurgeBatch)
	case c.PipelineLanes < 0:
		return table{}, fmt.Errorf("pgstore: Config.PipelineLanes must not be negative, got %d", c.PipelineLanes)
	case c.PipelineDepth < 0:
		return table{}, fmt.Errorf("pgstore: Config.PipelineDepth must not be negative, got %d", c.PipelineDepth)
	}
	if c.PipelineLanes == 0 {
		c.PipelineLanes = defaultPipelineLanes
	}
	if c.PipelineDepth == 0 {
		c.PipelineDepth = defaultPipelineDepth
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
	if c.PurgeBatch == 0 {
		c.PurgeBatch = defaultPurgeBatch
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return t, nil
}
