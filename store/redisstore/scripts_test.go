package redisstore

import (
	"context"
	"errors"
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

// TestBeginScriptRepeated runs the script of one Begin twice, as go-redis
// does when the first reply is lost: the repeat must get the same Fresh
// lease back, not InFlight, while another caller still gets InFlight.
func TestBeginScriptRepeated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, clock := newTestStore(t)
	k := idem.MustNamespace("scripts")
	key, err := idem.ParseKey(k, "repeat")
	if err != nil {
		t.Fatal(err)
	}
	req, err := idem.NewRequest([]byte(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	now := clock.Now().UnixMilli()
	token := idem.NewToken()
	run := func() []any {
		t.Helper()
		reply, err := beginScript.Run(ctx, s.client, []string{s.key(key)},
			now, req.Fingerprint.Bytes(), req.Payload, token, now+3600_000, now+10_000, 3600_000).Slice()
		if err != nil {
			t.Fatal(err)
		}
		return reply
	}
	first, err := s.beginOutcome(s.key(key), run(), req.Fingerprint, token, 10*time.Second, now)
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.beginOutcome(s.key(key), run(), req.Fingerprint, token, 10*time.Second, now)
	if err != nil {
		t.Fatal(err)
	}
	if first.Kind != idem.Fresh || again.Kind != idem.Fresh || again.Lease != first.Lease || again.TakenOver {
		t.Fatalf("repeated Begin = %+v, want the first answer %+v", again, first)
	}
	o, err := s.Begin(ctx, key, req, nil)
	if err != nil || o.Kind != idem.InFlight {
		t.Fatalf("Begin by another caller = %v %v, want in_flight", o.Kind, err)
	}
	if err := s.Commit(ctx, key, first.Lease, []byte(`1`)); err != nil {
		t.Fatalf("Commit with the repeated Begin's lease: %v", err)
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
