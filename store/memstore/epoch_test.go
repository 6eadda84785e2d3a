package memstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/store/memstore"
)

// TestTimesAtTheUnixEpoch pins that a clock reading the Unix epoch, as a
// test's fake clock may, is a time like any other: a record created then
// reports that creation time, not the zero Time, and a lease that ends
// exactly then is a lease, which a second Begin before its end finds in
// flight rather than taking it over.
func TestTimesAtTheUnixEpoch(t *testing.T) {
	ctx := context.Background()
	const lease = 30 * time.Second
	epoch := time.Unix(0, 0)
	now := epoch
	s, err := memstore.New(memstore.Config{Now: func() time.Time { return now }, Lease: lease})
	if err != nil {
		t.Fatal(err)
	}
	ns := idem.MustNamespace("epoch")
	req := idem.Request{Fingerprint: idem.FingerprintBytes([]byte("r"))}

	created, _ := idem.ParseKey(ns, "created")
	if _, err := s.Begin(ctx, created, req, nil); err != nil {
		t.Fatal(err)
	}
	rec, err := s.Get(ctx, created)
	if err != nil {
		t.Fatal(err)
	}
	if !rec.CreatedAt.Equal(epoch) {
		t.Errorf("CreatedAt of a record begun at the epoch = %v, want %v", rec.CreatedAt, epoch)
	}

	now = epoch.Add(-lease)
	leased, _ := idem.ParseKey(ns, "leased")
	o, err := s.Begin(ctx, leased, req, nil)
	if err != nil || o.Kind != idem.Fresh {
		t.Fatalf("Begin = %v, %v; want fresh", o.Kind, err)
	}
	if !o.Lease.ExpiresAt.Equal(epoch) {
		t.Fatalf("Lease.ExpiresAt = %v, want %v", o.Lease.ExpiresAt, epoch)
	}
	if rec, err := s.Get(ctx, leased); err != nil || !rec.LeaseExpiresAt.Equal(epoch) {
		t.Errorf("Get: LeaseExpiresAt = %v, %v; want %v", rec.LeaseExpiresAt, err, epoch)
	}
	now = epoch.Add(-time.Second)
	if o, err := s.Begin(ctx, leased, req, nil); err != nil || o.Kind != idem.InFlight {
		t.Errorf("Begin a second before the lease ends = %v (taken over %v), %v; want InFlight", o.Kind, o.TakenOver, err)
	}
}
