package redisstore

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
	"github.com/idemgo/idem/internal/redistest"
)

func newTestStore(t *testing.T) (*Store, *idemtest.Clock) {
	t.Helper()
	opts, err := redis.ParseURL(redistest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	client := redis.NewClient(opts)
	t.Cleanup(func() { _ = client.Close() })
	clock := idemtest.NewClock()
	s, err := New(client, Config{Prefix: redistest.Prefix(t), Now: clock.Now, Lease: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return s, clock
}

// TestBeginRepeated sends the script of one Begin twice, as go-redis does
// when the first reply is lost, on both its paths (SET … NX, and GET
// first as before Redis 7.0): the repeat must get the same Fresh lease
// back, not InFlight, while another caller still gets InFlight.
func TestBeginRepeated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, clock := newTestStore(t)
	req, err := idem.NewRequest([]byte(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, getFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("getFirst=%v", getFirst), func(t *testing.T) {
			s.getFirst = getFirst
			key, err := idem.ParseKey(idem.MustNamespace("scripts"), fmt.Sprintf("repeat-%v", getFirst))
			if err != nil {
				t.Fatal(err)
			}
			now := clock.Now().UnixMilli()
			b := beginCall{s: s, key: key, rkey: s.key(key), fp: req.Fingerprint, token: idem.NewToken(), leaseTTL: 10 * time.Second, leaseExp: now + 10_000, now: now}
			rec := appendInProgress(nil, req.Fingerprint.Bytes(), b.token, req.Payload, now, now+3600_000, now+10_000)
			run := func() idem.Outcome {
				t.Helper()
				o, err := b.run(ctx, req.Fingerprint.Bytes(), rec, 3600_000)
				if err != nil {
					t.Fatal(err)
				}
				return o
			}
			first, again := run(), run()
			if first.Kind != idem.Fresh || again.Kind != idem.Fresh || again.Lease != first.Lease || again.TakenOver || first.Lease.Fence != 1 {
				t.Fatalf("repeated Begin = %+v, want the first answer %+v, fence 1", again, first)
			}
			o, err := s.Begin(ctx, key, req, nil)
			if err != nil || o.Kind != idem.InFlight {
				t.Fatalf("Begin by another caller = %v %v, want in_flight", o.Kind, err)
			}
			if err := s.Commit(ctx, key, first.Lease, []byte(`1`)); err != nil {
				t.Fatalf("Commit with the repeated Begin's lease: %v", err)
			}
		})
	}
}

// TestSettleRepeated repeats successful settle calls, as go-redis does when
// a reply is lost: the same value under the same lease succeeds again and
// changes nothing; another value is a stale lease.
func TestSettleRepeated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newTestStore(t)
	ns := idem.MustNamespace("scripts")
	req, err := idem.NewRequest([]byte(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	begin := func(value string) (idem.Key, idem.Lease) {
		t.Helper()
		key, err := idem.ParseKey(ns, value)
		if err != nil {
			t.Fatal(err)
		}
		o, err := s.Begin(ctx, key, req, nil)
		if err != nil || o.Kind != idem.Fresh {
			t.Fatalf("Begin = %v %v", o.Kind, err)
		}
		return key, o.Lease
	}

	key, lease := begin("commit")
	for i := range 2 {
		if err := s.Commit(ctx, key, lease, []byte(`"v"`)); err != nil {
			t.Fatalf("Commit %d: %v", i, err)
		}
	}
	if err := s.Commit(ctx, key, lease, []byte(`"other"`)); !errors.Is(err, idem.ErrStaleToken) {
		t.Errorf("Commit of another result: %v, want ErrStaleToken", err)
	}
	if err := s.FailPermanent(ctx, key, lease, idem.StoredError{Class: "x"}); !errors.Is(err, idem.ErrStaleToken) {
		t.Errorf("FailPermanent after Commit: %v, want ErrStaleToken", err)
	}
	if rec, err := s.Get(ctx, key); err != nil || string(rec.Result) != `"v"` {
		t.Errorf("record = %s %v, want the first result", rec.Result, err)
	}

	key, lease = begin("fail")
	se := idem.StoredError{Class: "declined", Message: "no", Cause: "issuer"}
	for i := range 2 {
		if err := s.FailPermanent(ctx, key, lease, se); err != nil {
			t.Fatalf("FailPermanent %d: %v", i, err)
		}
	}
	if err := s.FailPermanent(ctx, key, lease, idem.StoredError{Class: "other"}); !errors.Is(err, idem.ErrStaleToken) {
		t.Errorf("FailPermanent of another error: %v, want ErrStaleToken", err)
	}
	if err := s.Commit(ctx, key, lease, []byte(`1`)); !errors.Is(err, idem.ErrStaleToken) {
		t.Errorf("Commit after FailPermanent: %v, want ErrStaleToken", err)
	}

	key, lease = begin("transient")
	if err := s.FailTransient(ctx, key, lease); err != nil {
		t.Fatal(err)
	}
	if err := s.FailTransient(ctx, key, lease); !errors.Is(err, idem.ErrStaleToken) {
		t.Errorf("repeated FailTransient: %v, want ErrStaleToken (the record is gone)", err)
	}
}
