package sqlitestore

import (
	"fmt"
	"strings"
	"time"

	"github.com/idemgo/idem"
)

// DefaultTable is the table a Store uses when Config.Table is empty.
const DefaultTable = "idempotency_record"

// maxTableLen bounds Config.Table, so that the derived index name stays a
// readable identifier.
const maxTableLen = 48

// MaxMaxPayload is the largest Config.MaxPayload: a record holds its
// request payload and its result (or stored error) in one row, which
// SQLite caps, the other columns included, at SQLITE_LIMIT_LENGTH:
// 1,000,000,000 bytes unless the build or the connection sets it lower.
// A row beyond it is refused by SQLite (SQLITE_TOOBIG), and the call that
// wrote it, a Commit after the effect has run, would fail as an
// unavailable store rather than with a *idem.PayloadTooLargeError before
// any I/O.
const MaxMaxPayload = 500_000_000 - 1024

// Config configures a Store. The zero Config is valid: every field has a
// default.
type Config struct {
	// Table is the name of the table holding the records. It must be an SQL
	// identifier: an ASCII letter or '_', then letters, digits or '_', at
	// most 48 bytes, and not starting with "sqlite_" (reserved by SQLite).
	// Migrate creates it, with an index named Table+"_expires_idx".
	// Defaults to DefaultTable ("idempotency_record").
	Table string

	// Retention is how long a record is kept, and replayed, after Begin.
	// BeginOpts.Retention overrides it per call. Defaults to
	// idem.DefaultRetention (24h).
	Retention time.Duration

	// Lease is how long a Fresh reservation is owned before another Begin of
	// the same key and request may take it over. BeginOpts.Lease overrides
	// it per call; Heartbeat extends by it when asked to extend by 0.
	// Defaults to idem.DefaultLease (30s).
	Lease time.Duration

	// MaxPayload is the largest request payload, result or encoded stored
	// error accepted, in bytes; larger ones are rejected with
	// *idem.PayloadTooLargeError before anything is written. Defaults to
	// idem.DefaultMaxPayload (4 MiB); at most MaxMaxPayload.
	MaxPayload int

	// Batch puts the lease-mode writes (Begin, the settle calls, Heartbeat)
	// of concurrent callers into shared transactions: the calls that arrive
	// while a write is under way wait for it, then run together, each in a
	// savepoint of its own (a call that fails is rolled back alone), made
	// durable by one commit and so one sync of the log. Under concurrency
	// this multiplies the writes per second a database on a disk can take;
	// a call that finds nothing under way runs at once, on its own, as
	// without Batch. idem proxy turns it on.
	Batch bool

	// Now is the clock every timestamp is computed from, in Go: the store
	// never reads SQLite's clock. Timestamps are stored as Unix microseconds.
	// Defaults to time.Now.
	Now func() time.Time
}

// validate checks c and fills in the defaults. Its messages name the field.
func (c *Config) validate() error {
	if c.Table == "" {
		c.Table = DefaultTable
	}
	if err := checkIdentifier(c.Table); err != nil {
		return fmt.Errorf("sqlitestore: Config.Table: %w", err)
	}
	switch {
	case c.Retention < 0:
		return fmt.Errorf("sqlitestore: Config.Retention must not be negative, got %s", c.Retention)
	case c.Lease < 0:
		return fmt.Errorf("sqlitestore: Config.Lease must not be negative, got %s", c.Lease)
	case c.MaxPayload < 0:
		return fmt.Errorf("sqlitestore: Config.MaxPayload must not be negative, got %d", c.MaxPayload)
	case c.MaxPayload > MaxMaxPayload:
		return fmt.Errorf("sqlitestore: Config.MaxPayload must be at most %d (MaxMaxPayload), as a record holds a payload and a result in one SQLite row of at most 1,000,000,000 bytes; got %d", MaxMaxPayload, c.MaxPayload)
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

// checkIdentifier reports whether s can be used, unquoted or quoted, as a
// table name.
func checkIdentifier(s string) error {
	switch {
	case s == "":
		return fmt.Errorf("empty identifier")
	case len(s) > maxTableLen:
		return fmt.Errorf("%q is %d bytes, the limit is %d", s, len(s), maxTableLen)
	case strings.HasPrefix(strings.ToLower(s), "sqlite_"):
		return fmt.Errorf("%q: names starting with sqlite_ are reserved by SQLite", s)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		letter := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_'
		if !letter && (i == 0 || c < '0' || c > '9') {
			return fmt.Errorf("%q is not an identifier: %q at byte %d (allowed: a letter or _, then letters, digits, _)", s, c, i)
		}
	}
	return nil
}
