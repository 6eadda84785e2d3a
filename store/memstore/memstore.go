// Package memstore is the in-memory idem.Store: one process, no
// persistence. It is meant for tests, single-process tools and as the
// reference backend of the conformance suite (idemtest). It is safe for
// concurrent use.
package memstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/idemgo/idem"
)

// Config configures a Store. The zero Config is valid.
type Config struct {
	// Retention is how long a record is kept after Begin. Defaults to
	// idem.DefaultRetention.
	Retention time.Duration
	// Lease is how long a Fresh reservation is owned before it may be taken
	// over. Defaults to idem.DefaultLease.
	Lease time.Duration
	// MaxPayload is the largest request or result payload accepted, in
	// bytes. Defaults to idem.DefaultMaxPayload.
	MaxPayload int
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
}

func (c *Config) validate() error {
	switch {
	case c.Retention < 0:
		return errors.New("memstore: Config.Retention must not be negative")
	case c.Lease < 0:
		return errors.New("memstore: Config.Lease must not be negative")
	case c.MaxPayload < 0:
		return errors.New("memstore: Config.MaxPayload must not be negative")
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

// Store is an in-memory idem.Store.
type Store struct {
	cfg Config
	mu  sync.Mutex
	// recs holds the records of each namespace by mapKey.
	recs map[idem.Namespace]*records
}

// entry is a record as the store keeps it: an idem.Record with its map key
// and lease token. The token and the request payload are parts of one
// string, made by Begin in one allocation, so that a record costs the
// collector few objects; times are Unix nanoseconds for the same reason.
// The map key is a string of its own, because the expiry heap keeps it
// after the entry is gone (released, or replaced by a takeover): sharing
// the payload's allocation, it would keep the payload alive until the
// retention of the record that is gone would have ended.
type entry struct {
	status       idem.Status
	fp           idem.Fingerprint
	queued       bool   // for records.compact: an item of e is kept (in fp's padding)
	key          string // the key in records.byKey (mapKey)
	token        string
	request      string
	result       []byte
	err          *idem.StoredError
	fence        int64
	created      int64
	expires      int64
	leaseExpires int64 // noLease unless in progress
}

// newEntry returns the in-progress entry under the map key key for
// payload: a new token and a copy of payload in one allocation.
func newEntry(key string, payload []byte) entry {
	var tok [idem.TokenLen]byte
	var sb strings.Builder
	sb.Grow(idem.TokenLen + len(payload))
	sb.Write(idem.AppendToken(tok[:0]))
	sb.Write(payload)
	all := sb.String()
	return entry{status: idem.StatusInProgress, key: key, token: all[:idem.TokenLen], request: all[idem.TokenLen:]}
}

// record returns e as the Record of key, without the request payload (see
// requestPayload). It shares e's slices.
func (e *entry) record(key idem.Key) idem.Record {
	return idem.Record{
		Key: key, Status: e.status, Fingerprint: e.fp, Result: e.result, Error: e.err,
		Fence: e.fence, CreatedAt: fromNanos(e.created), ExpiresAt: fromNanos(e.expires), LeaseExpiresAt: leaseEnd(e.leaseExpires),
	}
}

// requestPayload returns a copy of e's request payload.
func (e *entry) requestPayload() []byte { return []byte(e.request) }

// lease returns the reservation e holds.
func (e *entry) lease(ttl time.Duration) idem.Lease {
	return idem.Lease{Token: e.token, Fence: e.fence, ExpiresAt: leaseEnd(e.leaseExpires), TTL: ttl}
}

// toNanos is t in Unix nanoseconds, clamped to the range they cover
// (years 1678 to 2262), so that a retention reaching past it means "for
// good" rather than wrapping around.
func toNanos(t time.Time) int64 {
	switch {
	case t.After(maxTime):
		return math.MaxInt64
	case t.Before(minTime):
		return math.MinInt64 + 1
	}
	return t.UnixNano()
}

var (
	maxTime = time.Unix(0, math.MaxInt64)
	minTime = time.Unix(0, math.MinInt64+1)
)

// fromNanos is the time of Unix nanoseconds n.
func fromNanos(n int64) time.Time { return time.Unix(0, n) }

// noLease is the lease end of a record not in progress: below what
// toNanos gives, so that a lease may end at any time, the Unix epoch
// included.
const noLease = math.MinInt64

// leaseEnd is the time of the lease end n: the zero Time for noLease.
func leaseEnd(n int64) time.Time {
	if n == noLease {
		return time.Time{}
	}
	return fromNanos(n)
}

var _ idem.Store = (*Store)(nil)

// New returns an empty Store, or an error when a duration or MaxPayload of
// cfg is negative. The zero Store is not usable: make one with New.
func New(cfg Config) (*Store, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Store{cfg: cfg, recs: make(map[idem.Namespace]*records)}, nil
}

// mapKey appends the key of k within its namespace to dst: the value, and
// when k is scoped a NUL and the scope. Values and scopes hold no control
// characters, so the encoding is unambiguous.
func mapKey(dst []byte, k idem.Key) []byte {
	dst = append(dst, k.Value()...)
	if k.Scope() != "" {
		dst = append(append(dst, 0), k.Scope()...)
	}
	return dst
}

// find returns the entry of k, expired or not. The caller holds s.mu.
func (s *Store) find(k idem.Key) *entry {
	var buf [128]byte
	return s.findKey(k.Namespace(), mapKey(buf[:0], k))
}

// findKey is find for the map key key in ns.
func (s *Store) findKey(ns idem.Namespace, key []byte) *entry {
	r := s.recs[ns]
	if r == nil {
		return nil
	}
	return r.byKey[string(key)]
}

// live returns the entry of k unless it is missing or expired at now. The
// caller holds s.mu.
func (s *Store) live(k idem.Key, now int64) *entry {
	e := s.find(k)
	if e == nil || now < e.expires {
		return e
	}
	return nil
}

// write stores e as the record under e.key in ns, in place of whatever was
// there. The caller holds s.mu.
func (s *Store) write(ns idem.Namespace, e *entry) {
	r := s.recs[ns]
	if r == nil {
		r = newRecords()
		s.recs[ns] = r
	}
	r.byKey[e.key] = e
	r.written(e.key, e.expires)
}

// remove deletes the entry of k. The caller holds s.mu.
func (s *Store) remove(k idem.Key) {
	if r := s.recs[k.Namespace()]; r != nil {
		var buf [128]byte
		delete(r.byKey, string(mapKey(buf[:0], k)))
		r.shrink()
	}
}

// Begin implements idem.Store.
func (s *Store) Begin(ctx context.Context, key idem.Key, req idem.Request, opts *idem.BeginOpts) (idem.Outcome, error) {
	if err := idem.CheckBegin(key, req, opts, s.cfg.MaxPayload); err != nil {
		return idem.Outcome{}, err
	}
	if err := ctx.Err(); err != nil {
		return idem.Outcome{}, err
	}
	retention, leaseTTL := opts.Durations(s.cfg.Retention, s.cfg.Lease)
	now := s.cfg.Now()
	nowNS := toNanos(now)

	s.mu.Lock()
	defer s.mu.Unlock()
	var buf [128]byte
	mk := mapKey(buf[:0], key)
	e := s.findKey(key.Namespace(), mk)
	takenOver := false
	switch {
	case e == nil:
		e = &entry{key: string(mk)}
	case nowNS >= e.expires:
		// Expired: counts as absent. The fence keeps counting up.
	default:
		rec := e.record(key)
		o, takeover := idem.Decide(&rec, req.Fingerprint, now)
		if !takeover {
			if o.Kind == idem.Mismatch {
				o.RecordedRequest = e.requestPayload()
			}
			return copyOutcome(o), nil
		}
		takenOver = true
	}
	fence := e.fence + 1
	*e = newEntry(e.key, req.RecordedPayload())
	e.fp, e.fence, e.created = req.Fingerprint, fence, nowNS
	// The record lives at least as long as its lease (see idem.Store).
	e.leaseExpires = toNanos(now.Add(leaseTTL))
	e.expires = max(toNanos(now.Add(retention)), e.leaseExpires)
	s.write(key.Namespace(), e)
	return idem.Outcome{Kind: idem.Fresh, Lease: e.lease(leaseTTL), TakenOver: takenOver}, nil
}

// copyOutcome detaches an outcome's result and error from the stored
// record.
func copyOutcome(o idem.Outcome) idem.Outcome {
	o.Result = bytes.Clone(o.Result)
	if o.Error != nil {
		e := *o.Error
		o.Error = &e
	}
	return o
}

// owned returns the entry of key if lease is its current reservation.
func (s *Store) owned(key idem.Key, lease idem.Lease, now time.Time) (*entry, error) {
	e := s.live(key, toNanos(now))
	if e == nil || e.status != idem.StatusInProgress || e.token != lease.Token || e.fence != lease.Fence {
		return nil, idem.ErrStaleToken
	}
	return e, nil
}

// Commit implements idem.Store.
func (s *Store) Commit(ctx context.Context, key idem.Key, lease idem.Lease, result []byte) error {
	if err := idem.CheckLease(key, lease); err != nil {
		return err
	}
	if err := idem.CheckPayload("result", result, s.cfg.MaxPayload); err != nil {
		return err
	}
	return s.settle(ctx, key, lease, func(e *entry) {
		e.status = idem.StatusCommitted
		e.result = bytes.Clone(result)
	})
}

// FailPermanent implements idem.Store. The error counts against
// Config.MaxPayload as JSON, and is kept as that JSON decodes (invalid UTF-8
// replaced), as the stores that keep JSON replay it.
func (s *Store) FailPermanent(ctx context.Context, key idem.Key, lease idem.Lease, se idem.StoredError) error {
	if err := idem.CheckLease(key, lease); err != nil {
		return err
	}
	enc, err := json.Marshal(se)
	if err != nil { // a struct of strings always encodes
		return err
	}
	if err := idem.CheckPayload("error", enc, s.cfg.MaxPayload); err != nil {
		return err
	}
	var kept idem.StoredError
	if err := json.Unmarshal(enc, &kept); err != nil {
		return err
	}
	return s.settle(ctx, key, lease, func(e *entry) {
		e.status = idem.StatusFailed
		e.err = &kept
	})
}

func (s *Store) settle(ctx context.Context, key idem.Key, lease idem.Lease, apply func(*entry)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	now := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	e, err := s.owned(key, lease, now)
	if err != nil {
		return err
	}
	apply(e)
	e.leaseExpires = noLease
	return nil
}

// FailTransient implements idem.Store.
func (s *Store) FailTransient(ctx context.Context, key idem.Key, lease idem.Lease) error {
	if err := idem.CheckLease(key, lease); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	now := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.owned(key, lease, now); err != nil {
		return err
	}
	s.remove(key)
	return nil
}

// Heartbeat implements idem.Store.
func (s *Store) Heartbeat(ctx context.Context, key idem.Key, lease idem.Lease, extend time.Duration) (idem.Lease, error) {
	if err := idem.CheckLease(key, lease); err != nil {
		return idem.Lease{}, err
	}
	if err := ctx.Err(); err != nil {
		return idem.Lease{}, err
	}
	if extend <= 0 {
		extend = s.cfg.Lease
	}
	now := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	e, err := s.owned(key, lease, now)
	if err != nil {
		return idem.Lease{}, err
	}
	e.leaseExpires = toNanos(now.Add(extend))
	if e.leaseExpires > e.expires { // the record lives at least as long as its lease
		e.expires = e.leaseExpires
		s.write(key.Namespace(), e)
	}
	return e.lease(extend), nil
}

// PurgeExpired implements idem.Store.
func (s *Store) PurgeExpired(ctx context.Context, ns idem.Namespace, asOf time.Time) (int, error) {
	if err := ns.Validate(); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.recs[ns]
	if r == nil {
		return 0, nil
	}
	n := r.purge(toNanos(asOf))
	if r.empty() {
		delete(s.recs, ns)
	}
	return n, nil
}

// Get implements idem.Store.
func (s *Store) Get(ctx context.Context, key idem.Key) (idem.Record, error) {
	if key.IsZero() {
		return idem.Record{}, idem.ErrInvalidKey
	}
	if err := ctx.Err(); err != nil {
		return idem.Record{}, err
	}
	now := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.live(key, toNanos(now))
	if e == nil {
		return idem.Record{}, idem.ErrNotFound
	}
	r := e.record(key)
	r.Request = e.requestPayload()
	r.Result = bytes.Clone(r.Result)
	if r.Error != nil {
		se := *r.Error
		r.Error = &se
	}
	return r, nil
}
