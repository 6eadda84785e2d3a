package sqlitestore_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
)

// storeCalls runs every Store method once against k and reports the errors
// by method name. lease is passed to the settle calls.
func storeCalls(s idem.Store, k idem.Key, lease idem.Lease) map[string]error {
	ctx := context.Background()
	r, _ := idem.NewRequest([]byte(`{}`))
	_, begin := s.Begin(ctx, k, r, nil)
	_, heartbeat := s.Heartbeat(ctx, k, lease, 0)
	_, purge := s.PurgeExpired(ctx, k.Namespace(), time.Now())
	_, get := s.Get(ctx, k)
	return map[string]error{
		"Begin":         begin,
		"Commit":        s.Commit(ctx, k, lease, []byte(`1`)),
		"FailPermanent": s.FailPermanent(ctx, k, lease, idem.StoredError{Class: "c"}),
		"FailTransient": s.FailTransient(ctx, k, lease),
		"Heartbeat":     heartbeat,
		"PurgeExpired":  purge,
		"Get":           get,
	}
}

func TestUnavailable(t *testing.T) {
	t.Parallel()
	for name, setup := range map[string]func(t *testing.T) idem.Store{
		"ClosedDB": func(t *testing.T) idem.Store {
			db, _ := newDB(t, 2)
			s := newStore(t, db, nil)
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			return s
		},
		"NotMigrated": func(t *testing.T) idem.Store {
			return newStore(t, openDB(t, filepath.Join(t.TempDir(), "idem.db"), dsnParams, 2), nil)
		},
		"FileIsNotADatabase": func(t *testing.T) idem.Store {
			return newStore(t, openDB(t, t.TempDir(), dsnParams, 2), nil) // a directory
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := setup(t)
			k := mustKey(t, idemtest.RandomNamespace(t), "k")
			for method, err := range storeCalls(s, k, idem.Lease{Token: "t", Fence: 1}) {
				if !errors.Is(err, idem.ErrUnavailable) {
					t.Errorf("%s: %v, want ErrUnavailable", method, err)
				}
			}
		})
	}
}

func TestCancelledContextNoWrite(t *testing.T) {
	t.Parallel()
	db, _ := newDB(t, 2)
	s := newStore(t, db, nil)
	k := mustKey(t, idemtest.RandomNamespace(t), "k")
	r := mustRequest(t, `{}`)
	lease := mustBegin(t, s, k, r, idem.Fresh).Lease
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Heartbeat(ctx, k, lease, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("Heartbeat: %v, want context.Canceled", err)
	}
	if err := s.FailTransient(ctx, k, lease); !errors.Is(err, context.Canceled) {
		t.Errorf("FailTransient: %v, want context.Canceled", err)
	}
	if n, err := s.PurgeExpired(ctx, k.Namespace(), time.Now().Add(48*time.Hour)); !errors.Is(err, context.Canceled) || n != 0 {
		t.Errorf("PurgeExpired: %d, %v, want 0, context.Canceled", n, err)
	}
	if _, err := s.Get(ctx, k); !errors.Is(err, context.Canceled) {
		t.Errorf("Get: %v, want context.Canceled", err)
	}
	rec, err := s.Get(context.Background(), k)
	if err != nil || rec.Status != idem.StatusInProgress || !rec.LeaseExpiresAt.Equal(lease.ExpiresAt) {
		t.Errorf("record after cancelled calls = %+v, %v; want it unchanged", rec, err)
	}
}

func TestCorruptRecord(t *testing.T) {
	t.Parallel()
	db, _ := newDB(t, 2)
	s := newStore(t, db, nil)
	k := mustKey(t, idemtest.RandomNamespace(t), "k")
	r := mustRequest(t, `{}`)
	mustBegin(t, s, k, r, idem.Fresh)
	if _, err := db.Exec(`UPDATE idempotency_record SET request_hash = x'00' WHERE namespace = ?`, string(k.Namespace())); err != nil {
		t.Fatal(err)
	}
	// As in pgstore and redisstore: a store that cannot read its own
	// record is unavailable, and the error says why.
	_, err := s.Begin(context.Background(), k, r, nil)
	if !errors.Is(err, idem.ErrUnavailable) || !errors.Is(err, idem.ErrInvalidFingerprint) || !strings.Contains(fmt.Sprint(err), "corrupt record") {
		t.Errorf("Begin on a corrupt record: %v, want ErrUnavailable wrapping a corruption error wrapping ErrInvalidFingerprint", err)
	}
	if _, err := s.Get(context.Background(), k); !errors.Is(err, idem.ErrUnavailable) || !strings.Contains(fmt.Sprint(err), "corrupt record") {
		t.Errorf("Get of a corrupt record: %v, want ErrUnavailable wrapping a corruption error", err)
	}
}

// An expired record counts as absent whatever it holds, as in pgstore and
// redisstore: a row that does not decode stops blocking its key once it has
// expired, and Begin replaces it.
func TestExpiredCorruptRecordIsReplaced(t *testing.T) {
	t.Parallel()
	for column, value := range map[string]string{"request_hash": "x'00'", "error_payload": "'not json'"} {
		t.Run(column, func(t *testing.T) {
			t.Parallel()
			db, _ := newDB(t, 2)
			clock := idemtest.NewClock()
			s := newStore(t, db, clock.Now)
			k := mustKey(t, idemtest.RandomNamespace(t), "k")
			r := mustRequest(t, `{}`)
			mustBegin(t, s, k, r, idem.Fresh)
			if _, err := db.Exec(`UPDATE idempotency_record SET `+column+` = `+value+` WHERE namespace = ?`, string(k.Namespace())); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Begin(context.Background(), k, r, nil); !errors.Is(err, idem.ErrUnavailable) {
				t.Fatalf("Begin on a live corrupt record: %v, want ErrUnavailable", err)
			}
			clock.Advance(idemtest.Retention)
			if _, err := s.Get(context.Background(), k); !errors.Is(err, idem.ErrNotFound) {
				t.Errorf("Get of an expired corrupt record: %v, want ErrNotFound", err)
			}
			o := mustBegin(t, s, k, r, idem.Fresh)
			if o.Lease.Fence != 2 || o.TakenOver {
				t.Errorf("Begin after expiry = %+v, want a fresh reservation with fence 2, not a takeover", o)
			}
			rec, err := s.Get(context.Background(), k)
			if err != nil || rec.Status != idem.StatusInProgress || rec.Error != nil || rec.Fingerprint != r.Fingerprint {
				t.Errorf("record after the replacement = %+v, %v; want a clean in-progress record", rec, err)
			}
		})
	}
}
