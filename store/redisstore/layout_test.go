package redisstore_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
	"github.com/idemgo/idem/internal/redistest"
	"github.com/idemgo/idem/store/redisstore"
)

// TestLargePayloadsRoundTrip takes a request payload of 1 MiB and a result
// of 3 MiB, far past what the scripts read of a record's head, through
// every path of both Begin scripts: Mismatch and InFlight while in
// progress, a repeated Commit (same result: success; another: stale), Get,
// the replay and a Mismatch after the Commit, all byte for byte.
func TestLargePayloadsRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client := sharedClient(t)
	request := []byte(`"` + strings.Repeat("q", 1<<20) + `"`)
	result := []byte(`"` + strings.Repeat("r", 3<<20) + `"`)
	req, other := mustRequest(t, string(request)), mustRequest(t, `{"other":1}`)
	for _, getFirst := range []bool{false, true} {
		s, err := redisstore.New(client, redisstore.Config{Prefix: redistest.Prefix(t), MaxPayload: 4 << 20})
		if err != nil {
			t.Fatal(err)
		}
		if getFirst {
			redisstore.BeginByGet(s)
		}
		key := mustKey(t, idemtest.RandomNamespace(t), "large")
		mismatch := func(when string) {
			t.Helper()
			o, err := s.Begin(ctx, key, other, nil)
			if err != nil || o.Kind != idem.Mismatch || !bytes.Equal(o.RecordedRequest, request) {
				t.Errorf("getFirst=%v: Begin of another request %s = %v (recorded request of %d bytes), %v; want Mismatch with the request",
					getFirst, when, o.Kind, len(o.RecordedRequest), err)
			}
		}
		o, err := s.Begin(ctx, key, req, nil)
		if err != nil || o.Kind != idem.Fresh {
			t.Fatalf("Begin = %v, %v", o.Kind, err)
		}
		mismatch("in progress")
		if o, err := s.Begin(ctx, key, req, nil); err != nil || o.Kind != idem.InFlight {
			t.Errorf("getFirst=%v: Begin again = %v, %v; want InFlight", getFirst, o.Kind, err)
		}
		for i := range 2 {
			if err := s.Commit(ctx, key, o.Lease, result); err != nil {
				t.Fatalf("Commit %d: %v", i, err)
			}
		}
		longer := append(bytes.Clone(result[:len(result)-1]), 'r', '"')
		if err := s.Commit(ctx, key, o.Lease, longer); !errors.Is(err, idem.ErrStaleToken) {
			t.Errorf("getFirst=%v: Commit of a longer result after the Commit: %v, want ErrStaleToken", getFirst, err)
		}
		rec, err := s.Get(ctx, key)
		if err != nil || rec.Status != idem.StatusCommitted || !bytes.Equal(rec.Request, request) || !bytes.Equal(rec.Result, result) {
			t.Errorf("getFirst=%v: Get = %s, request of %d bytes, result of %d, %v; want both as given", getFirst, rec.Status, len(rec.Request), len(rec.Result), err)
		}
		if o, err := s.Begin(ctx, key, req, nil); err != nil || o.Kind != idem.PriorResult || !bytes.Equal(o.Result, result) {
			t.Errorf("getFirst=%v: replay = %v (result of %d bytes), %v; want the result", getFirst, o.Kind, len(o.Result), err)
		}
		mismatch("committed")
	}
}

// TestStaleTokensChangeNothing settles an in-progress record with leases
// a caller may hold or make up: tokens shorter and longer than the
// store's (past the head of the record the scripts read first), a prefix
// of the current token and the token with a byte more, bytes no token
// holds, the right token with another fence. Each call answers
// ErrStaleToken and leaves the record's bytes and its Redis TTL as they
// were; the real lease then commits.
func TestStaleTokensChangeNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client := sharedClient(t)
	prefix := redistest.Prefix(t)
	s := newStore(t, client, prefix, time.Now)
	ns := idemtest.RandomNamespace(t)
	key := mustKey(t, ns, "stale")
	rkey := prefix + string(ns) + ":0::stale" // see recordKey
	o, err := s.Begin(ctx, key, mustRequest(t, `{"a":1}`), nil)
	if err != nil || o.Kind != idem.Fresh {
		t.Fatalf("Begin = %v, %v", o.Kind, err)
	}
	tok := o.Lease.Token
	before, err := client.Get(ctx, rkey).Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := client.PExpire(ctx, rkey, time.Hour).Err(); err != nil { // a TTL a rewrite would lose or move
		t.Fatal(err)
	}
	for _, l := range []idem.Lease{
		{Token: "x", Fence: 1},
		{Token: tok[:len(tok)-1], Fence: 1},
		{Token: tok + "x", Fence: 1},
		{Token: strings.Repeat("t", 300), Fence: 1},
		{Token: strings.Repeat("t", 70_000), Fence: 1},
		{Token: "\x00\xff\x01", Fence: 1},
		{Token: tok, Fence: 0},
		{Token: tok, Fence: 2},
		{Token: tok, Fence: -1},
		{Token: tok, Fence: 1<<53 + 1},
	} {
		name := l.Token[:min(len(l.Token), 45)]
		if err := s.Commit(ctx, key, l, []byte(`1`)); !errors.Is(err, idem.ErrStaleToken) {
			t.Errorf("Commit with token %q fence %d: %v, want ErrStaleToken", name, l.Fence, err)
		}
		if err := s.FailPermanent(ctx, key, l, idem.StoredError{Class: "c"}); !errors.Is(err, idem.ErrStaleToken) {
			t.Errorf("FailPermanent with token %q fence %d: %v, want ErrStaleToken", name, l.Fence, err)
		}
		if _, err := s.Heartbeat(ctx, key, l, 2*time.Hour); !errors.Is(err, idem.ErrStaleToken) {
			t.Errorf("Heartbeat with token %q fence %d: %v, want ErrStaleToken", name, l.Fence, err)
		}
		if err := s.FailTransient(ctx, key, l); !errors.Is(err, idem.ErrStaleToken) {
			t.Errorf("FailTransient with token %q fence %d: %v, want ErrStaleToken", name, l.Fence, err)
		}
	}
	if after, err := client.Get(ctx, rkey).Result(); err != nil || after != before {
		t.Errorf("record after the stale calls: %q, %v; want it unchanged, %q", after, err, before)
	}
	if ttl, err := client.PTTL(ctx, rkey).Result(); err != nil || ttl > time.Hour || ttl < time.Hour-time.Minute {
		t.Errorf("TTL after the stale calls = %v, %v; want it unchanged, about an hour", ttl, err)
	}
	if err := s.Commit(ctx, key, o.Lease, []byte(`1`)); err != nil {
		t.Errorf("Commit with the lease: %v", err)
	}
}

// TestKeyTTLFollowsRecord checks the Redis TTL of a record's key, which
// evicts it by the server's clock: the retention after Begin; unchanged by
// a Heartbeat within the record's life and by a Commit (which rewrite the
// string in place); moved to the lease's end by a Heartbeat past the
// record's expires_at; and a Begin that replaces an expired record (still
// in Redis) sets the retention again.
func TestKeyTTLFollowsRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client := sharedClient(t)
	prefix := redistest.Prefix(t)
	clock := idemtest.NewClock()
	s, err := redisstore.New(client, redisstore.Config{Prefix: prefix, Now: clock.Now, Retention: time.Hour, Lease: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ns := idemtest.RandomNamespace(t)
	key := mustKey(t, ns, "ttl")
	rkey := prefix + string(ns) + ":0::ttl" // see recordKey
	// The TTL counts down by the server's clock while the test runs: it
	// must be within a minute below want.
	wantTTL := func(when string, want time.Duration) {
		t.Helper()
		ttl, err := client.PTTL(ctx, rkey).Result()
		if err != nil || ttl > want || ttl < want-time.Minute {
			t.Errorf("TTL %s = %v, %v; want about %v", when, ttl, err, want)
		}
	}
	req := mustRequest(t, `{"a":1}`)
	o, err := s.Begin(ctx, key, req, nil)
	if err != nil || o.Kind != idem.Fresh {
		t.Fatalf("Begin = %v, %v", o.Kind, err)
	}
	wantTTL("after Begin", time.Hour)
	if err := client.PExpire(ctx, rkey, 50*time.Minute).Err(); err != nil { // to tell a kept TTL from a reset one
		t.Fatal(err)
	}
	lease, err := s.Heartbeat(ctx, key, o.Lease, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	wantTTL("after a Heartbeat within the record's life", 50*time.Minute)
	clock.Advance(30 * time.Second)
	lease, err = s.Heartbeat(ctx, key, lease, 3*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	wantTTL("after a Heartbeat past expires_at", 3*time.Hour)
	if rec, err := s.Get(ctx, key); err != nil || !rec.ExpiresAt.Equal(lease.ExpiresAt) {
		t.Errorf("expires_at after a Heartbeat past it = %v, %v; want the lease's end %v", rec.ExpiresAt, err, lease.ExpiresAt)
	}
	if err := s.Commit(ctx, key, lease, []byte(`1`)); err != nil {
		t.Fatal(err)
	}
	wantTTL("after Commit", 3*time.Hour)
	clock.Advance(4 * time.Hour) // expired by the store's clock, still in Redis
	o, err = s.Begin(ctx, key, req, nil)
	if err != nil || o.Kind != idem.Fresh || o.Lease.Fence != 2 {
		t.Fatalf("Begin after expiry = %v fence %d, %v; want Fresh with fence 2", o.Kind, o.Lease.Fence, err)
	}
	wantTTL("after a Begin replacing an expired record", time.Hour)
}
