// This file is a complete store written from idem.Store's contract, the
// kind of backend a store's author brings to the suite: mapStore keeps its
// records in a map guarded by a mutex. It shows the helpers of package idem
// a backend builds on: CheckBegin, CheckLease and CheckPayload reject
// invalid arguments with the errors every backend gives; BeginOpts.Durations
// applies the per-call overrides; Decide answers a Begin that finds a live
// record; NewToken makes the token of each reservation. mapStoreConformance
// is the body of its test:
//
//	func TestConformance(t *testing.T) { mapStoreConformance(t) }
package idemtest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"time"

	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
)

// mapStoreConfig configures a mapStore. Zero fields take idem's defaults.
type mapStoreConfig struct {
	Now        func() time.Time // the clock of every time the store keeps
	Retention  time.Duration
	Lease      time.Duration
	MaxPayload int
}

// mapEntry is a record and the token of its current (or last) lease.
type mapEntry struct {
	rec   idem.Record
	token string
}

// mapStore is an idem.Store in lease mode kept in memory.
type mapStore struct {
	cfg  mapStoreConfig
	mu   sync.Mutex
	recs map[idem.Key]*mapEntry
}

func newMapStore(cfg mapStoreConfig) *mapStore {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Retention == 0 {
		cfg.Retention = idem.DefaultRetention
	}
	if cfg.Lease == 0 {
		cfg.Lease = idem.DefaultLease
	}
	if cfg.MaxPayload == 0 {
		cfg.MaxPayload = idem.DefaultMaxPayload
	}
	return &mapStore{cfg: cfg, recs: map[idem.Key]*mapEntry{}}
}

// live returns the live entry of key: one past its expires_at counts as
// absent (and is dropped here, so a record made anew starts at fence 1).
func (s *mapStore) live(key idem.Key, now time.Time) *mapEntry {
	e := s.recs[key]
	if e != nil && !e.rec.ExpiresAt.After(now) {
		delete(s.recs, key)
		return nil
	}
	return e
}

// reserve gives e a new owner: a new token and a lease from now, and an
// expiry counted from now that is never before the lease's end.
func (e *mapEntry) reserve(now time.Time, retention, lease time.Duration) idem.Lease {
	e.token = idem.NewToken()
	e.rec.Status = idem.StatusInProgress
	e.rec.LeaseExpiresAt = now.Add(lease)
	e.rec.ExpiresAt = now.Add(retention)
	if e.rec.LeaseExpiresAt.After(e.rec.ExpiresAt) {
		e.rec.ExpiresAt = e.rec.LeaseExpiresAt
	}
	return idem.Lease{Token: e.token, Fence: e.rec.Fence, ExpiresAt: e.rec.LeaseExpiresAt, TTL: lease}
}

func (s *mapStore) Begin(ctx context.Context, key idem.Key, req idem.Request, opts *idem.BeginOpts) (idem.Outcome, error) {
	if err := idem.CheckBegin(key, req, opts, s.cfg.MaxPayload); err != nil {
		return idem.Outcome{}, err
	}
	if err := ctx.Err(); err != nil {
		return idem.Outcome{}, err
	}
	retention, lease := opts.Durations(s.cfg.Retention, s.cfg.Lease)
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.Now()
	e := s.live(key, now)
	if e == nil {
		e = &mapEntry{rec: idem.Record{
			Key: key, Fingerprint: req.Fingerprint, Fence: 1, CreatedAt: now,
			Request: bytes.Clone(req.RecordedPayload()),
		}}
		s.recs[key] = e
		return idem.Outcome{Kind: idem.Fresh, Lease: e.reserve(now, retention, lease)}, nil
	}
	o, takeover := idem.Decide(&e.rec, req.Fingerprint, now)
	if takeover {
		e.rec.Fence++
		return idem.Outcome{Kind: idem.Fresh, TakenOver: true, Lease: e.reserve(now, retention, lease)}, nil
	}
	// Decide's outcome shares the record's slices: hand out copies.
	o.Result = bytes.Clone(o.Result)
	o.RecordedRequest = bytes.Clone(o.RecordedRequest)
	if o.Error != nil {
		stored := *o.Error
		o.Error = &stored
	}
	return o, nil
}

// owned returns the in-progress entry whose current lease is lease, or
// ErrStaleToken: the token and the fence must both match.
func (s *mapStore) owned(key idem.Key, lease idem.Lease) (*mapEntry, error) {
	e := s.live(key, s.cfg.Now())
	if e == nil || e.rec.Status != idem.StatusInProgress || e.token != lease.Token || e.rec.Fence != lease.Fence {
		return nil, idem.ErrStaleToken
	}
	return e, nil
}

func (s *mapStore) Commit(ctx context.Context, key idem.Key, lease idem.Lease, result []byte) error {
	if err := idem.CheckLease(key, lease); err != nil {
		return err
	}
	if err := idem.CheckPayload("result", result, s.cfg.MaxPayload); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, err := s.owned(key, lease)
	if err != nil {
		return err
	}
	e.rec.Status, e.rec.Result, e.rec.LeaseExpiresAt = idem.StatusCommitted, bytes.Clone(result), time.Time{}
	return nil
}

func (s *mapStore) FailPermanent(ctx context.Context, key idem.Key, lease idem.Lease, stored idem.StoredError) error {
	if err := idem.CheckLease(key, lease); err != nil {
		return err
	}
	// The encoded error counts against the payload limit too.
	encoded, err := json.Marshal(stored)
	if err != nil {
		return err
	}
	if err := idem.CheckPayload("error", encoded, s.cfg.MaxPayload); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, err := s.owned(key, lease)
	if err != nil {
		return err
	}
	e.rec.Status, e.rec.Error, e.rec.LeaseExpiresAt = idem.StatusFailed, &stored, time.Time{}
	return nil
}

func (s *mapStore) FailTransient(ctx context.Context, key idem.Key, lease idem.Lease) error {
	if err := idem.CheckLease(key, lease); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.owned(key, lease); err != nil {
		return err
	}
	delete(s.recs, key)
	return nil
}

func (s *mapStore) Heartbeat(ctx context.Context, key idem.Key, lease idem.Lease, extend time.Duration) (idem.Lease, error) {
	if err := idem.CheckLease(key, lease); err != nil {
		return idem.Lease{}, err
	}
	if err := ctx.Err(); err != nil {
		return idem.Lease{}, err
	}
	if extend <= 0 {
		extend = s.cfg.Lease
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, err := s.owned(key, lease)
	if err != nil {
		return idem.Lease{}, err
	}
	e.rec.LeaseExpiresAt = s.cfg.Now().Add(extend)
	if e.rec.LeaseExpiresAt.After(e.rec.ExpiresAt) {
		e.rec.ExpiresAt = e.rec.LeaseExpiresAt
	}
	return idem.Lease{Token: e.token, Fence: e.rec.Fence, ExpiresAt: e.rec.LeaseExpiresAt, TTL: extend}, nil
}

func (s *mapStore) PurgeExpired(ctx context.Context, ns idem.Namespace, asOf time.Time) (int, error) {
	if err := ns.Validate(); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	purged := 0
	for key, e := range s.recs {
		if key.Namespace() == ns && !e.rec.ExpiresAt.After(asOf) {
			delete(s.recs, key)
			purged++
		}
	}
	return purged, nil
}

func (s *mapStore) Get(ctx context.Context, key idem.Key) (idem.Record, error) {
	if key.IsZero() {
		return idem.Record{}, idem.ErrInvalidKey
	}
	if err := ctx.Err(); err != nil {
		return idem.Record{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.live(key, s.cfg.Now())
	if e == nil {
		return idem.Record{}, idem.ErrNotFound
	}
	rec := e.rec // the caller's to change: copy what it shares
	rec.Request, rec.Result = bytes.Clone(rec.Request), bytes.Clone(rec.Result)
	if rec.Error != nil {
		stored := *rec.Error
		rec.Error = &stored
	}
	return rec, nil
}

// mapStoreConformance runs the suite against mapStore.
func mapStoreConformance(t *testing.T) {
	idemtest.Exercise(t, idemtest.Harness{
		NewStore: func(t *testing.T, now func() time.Time) idem.Store {
			return newMapStore(mapStoreConfig{
				Now:        now,
				Retention:  idemtest.Retention,
				Lease:      idemtest.Lease,
				MaxPayload: 1 << 16,
			})
		},
		MaxPayload: 1 << 16,
	})
}

// A store written from idem.Store's contract alone, and the test that runs
// the suite against it.
func ExampleExercise_mapStore() {
	_ = mapStoreConformance // func TestConformance(t *testing.T) { mapStoreConformance(t) }
}
