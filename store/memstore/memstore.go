// Package memstore is the in-memory idem.Store: one process, no
// persistence. It is meant for tests, single-process tools and as the
// reference backend of the conformance suite (idemtest). It is safe for
// concurrent use.
package memstore

import (
	"bytes"
	"context"
	"errors"
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
	cfg  Config
	mu   sync.Mutex
	recs map[recKey]*entry
}

type recKey struct {
	ns           idem.Namespace
	scope, value string
}

// entry is a record as the store keeps it: an idem.Record without the key
// (the map's) and with the lease token. It holds fewer pointers than a
// Record for the collector to follow in a large store.
type entry struct {
	status       idem.Status
	fp           idem.Fingerprint
	request      []byte
	result       []byte
	err          *idem.StoredError
	token        string
	fence        int64
	created      time.Time
	expires      time.Time
	leaseExpires time.Time // zero unless in progress
}

// record returns e as the Record of key. It shares e's slices.
func (e *entry) record(key idem.Key) idem.Record {
	return idem.Record{
		Key: key, Status: e.status, Fingerprint: e.fp, Request: e.request, Result: e.result, Error: e.err,
		Fence: e.fence, CreatedAt: e.created, ExpiresAt: e.expires, LeaseExpiresAt: e.leaseExpires,
	}
}

var _ idem.Store = (*Store)(nil)

// New returns an empty Store.
func New(cfg Config) (*Store, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Store{cfg: cfg, recs: make(map[recKey]*entry)}, nil
}

func keyOf(k idem.Key) recKey { return recKey{k.Namespace(), k.Scope(), k.Value()} }

// live returns the entry of k unless it is missing or expired at now.
func (s *Store) live(k recKey, now time.Time) *entry {
	e := s.recs[k]
	if e == nil || now.Before(e.expires) {
		return e
	}
	return nil
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
	k := keyOf(key)
	now := s.cfg.Now()

	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.recs[k]
	takenOver := false
	switch {
	case e == nil:
		e = &entry{}
		s.recs[k] = e
	case !now.Before(e.expires):
		// Expired: counts as absent. The fence keeps counting up.
	default:
		rec := e.record(key)
		o, takeover := idem.Decide(&rec, req.Fingerprint, now)
		if !takeover {
			return copyOutcome(o), nil
		}
		takenOver = true
	}
	*e = entry{
		status:       idem.StatusInProgress,
		fp:           req.Fingerprint,
		request:      bytes.Clone(req.RecordedPayload()),
		token:        idem.NewToken(),
		fence:        e.fence + 1,
		created:      now,
		expires:      now.Add(retention),
		leaseExpires: now.Add(leaseTTL),
	}
	lease := idem.Lease{Token: e.token, Fence: e.fence, ExpiresAt: e.leaseExpires, TTL: leaseTTL}
	return idem.Outcome{Kind: idem.Fresh, Lease: lease, TakenOver: takenOver}, nil
}

// copyOutcome detaches an outcome from the stored record.
func copyOutcome(o idem.Outcome) idem.Outcome {
	o.Result = bytes.Clone(o.Result)
	o.RecordedRequest = bytes.Clone(o.RecordedRequest)
	if o.Error != nil {
		e := *o.Error
		o.Error = &e
	}
	return o
}

// owned returns the entry of key if lease is its current reservation.
func (s *Store) owned(key idem.Key, lease idem.Lease, now time.Time) (recKey, *entry, error) {
	k := keyOf(key)
	e := s.live(k, now)
	if e == nil || e.status != idem.StatusInProgress || e.token != lease.Token || e.fence != lease.Fence {
		return k, nil, idem.ErrStaleToken
	}
	return k, e, nil
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

// FailPermanent implements idem.Store.
func (s *Store) FailPermanent(ctx context.Context, key idem.Key, lease idem.Lease, se idem.StoredError) error {
	if err := idem.CheckLease(key, lease); err != nil {
		return err
	}
	return s.settle(ctx, key, lease, func(e *entry) {
		e.status = idem.StatusFailed
		e.err = &se
	})
}

func (s *Store) settle(ctx context.Context, key idem.Key, lease idem.Lease, apply func(*entry)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	now := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	_, e, err := s.owned(key, lease, now)
	if err != nil {
		return err
	}
	apply(e)
	e.leaseExpires = time.Time{}
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
	k, _, err := s.owned(key, lease, now)
	if err != nil {
		return err
	}
	delete(s.recs, k)
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
	_, e, err := s.owned(key, lease, now)
	if err != nil {
		return idem.Lease{}, err
	}
	e.leaseExpires = now.Add(extend)
	return idem.Lease{Token: e.token, Fence: e.fence, ExpiresAt: e.leaseExpires, TTL: extend}, nil
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
	n := 0
	for k, e := range s.recs {
		if k.ns == ns && !e.expires.After(asOf) {
			delete(s.recs, k)
			n++
		}
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
	e := s.live(keyOf(key), now)
	if e == nil {
		return idem.Record{}, idem.ErrNotFound
	}
	r := e.record(key)
	r.Request = bytes.Clone(r.Request)
	r.Result = bytes.Clone(r.Result)
	if r.Error != nil {
		se := *r.Error
		r.Error = &se
	}
	return r, nil
}
