package memstore_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
	"github.com/idemgo/idem/store/memstore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	idemtest.Exercise(t, idemtest.Harness{
		NewStore: func(t *testing.T, now func() time.Time) idem.Store {
			s, err := memstore.New(memstore.Config{Now: now, Retention: idemtest.Retention, Lease: idemtest.Lease, MaxPayload: 1 << 16})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		MaxPayload: 1 << 16,
	})
}

func TestConfigValidation(t *testing.T) {
	for name, cfg := range map[string]memstore.Config{
		"negative retention": {Retention: -1},
		"negative lease":     {Lease: -1},
		"negative payload":   {MaxPayload: -1},
	} {
		if _, err := memstore.New(cfg); err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
}

// TestRetentionPastTheYear2262 pins the clamping of stored times: a
// retention reaching past what Unix nanoseconds can hold keeps the record,
// rather than wrapping around to a time in the past.
func TestRetentionPastTheYear2262(t *testing.T) {
	ctx := context.Background()
	s, err := memstore.New(memstore.Config{Retention: 250 * 365 * 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	key, err := idem.ParseKey("ns", "far")
	if err != nil {
		t.Fatal(err)
	}
	req := idem.Request{Fingerprint: idem.FingerprintBytes([]byte("x"))}
	o, err := s.Begin(ctx, key, req, nil)
	if err != nil || o.Kind != idem.Fresh {
		t.Fatalf("Begin = %v, %v", o.Kind, err)
	}
	if err := s.Commit(ctx, key, o.Lease, []byte(`1`)); err != nil {
		t.Fatal(err)
	}
	if o, err := s.Begin(ctx, key, req, nil); err != nil || o.Kind != idem.PriorResult {
		t.Fatalf("second Begin = %v, %v; want PriorResult", o.Kind, err)
	}
	rec, err := s.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if !rec.ExpiresAt.After(time.Now().AddDate(200, 0, 0)) {
		t.Errorf("ExpiresAt = %v, want after the year 2200", rec.ExpiresAt)
	}
	if n, err := s.PurgeExpired(ctx, "ns", time.Now().AddDate(100, 0, 0)); err != nil || n != 0 {
		t.Errorf("PurgeExpired a century on = %d, %v; want 0", n, err)
	}
}
