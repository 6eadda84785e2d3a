package idemtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/idemgo/idem"
)

// leaseCalls are the calls that need the current lease, by name, each
// made with ctx and lease l on key k.
func leaseCalls(ctx context.Context, s idem.Store, k idem.Key, l idem.Lease) map[string]func() error {
	return map[string]func() error{
		"Commit":        func() error { return s.Commit(ctx, k, l, []byte(`"stale"`)) },
		"FailPermanent": func() error { return s.FailPermanent(ctx, k, l, idem.StoredError{Class: "stale"}) },
		"FailTransient": func() error { return s.FailTransient(ctx, k, l) },
		"Heartbeat":     func() error { _, err := s.Heartbeat(ctx, k, l, time.Hour); return err },
	}
}

// testStaleCallsChangeNothing: after a takeover, every call with the old
// lease is ErrStaleToken and leaves the record exactly as it was, the
// lease's end included (a stale Heartbeat extends nothing).
func testStaleCallsChangeNothing(t *testing.T, b *bundle) {
	k := b.key(t, "stale-nothing")
	r := request(t, `{"a":1}`)
	old := fresh(t, b.store, k, r)
	b.clock.Advance(Lease)
	o := begin(t, b.store, k, r, nil)
	wantKind(t, o, idem.Fresh)
	before := get(t, b.store, k)
	for name, call := range leaseCalls(context.Background(), b.store, k, old) {
		if err := call(); !errors.Is(err, idem.ErrStaleToken) {
			t.Errorf("%s with the taken-over lease: %v, want ErrStaleToken", name, err)
		}
		if diff := cmp.Diff(before, get(t, b.store, k), recordOpts); diff != "" {
			t.Errorf("the stale %s changed the record (-before +after):\n%s", name, diff)
		}
	}
}

// testExpiredLeaseIsStale: once the record has expired as a whole (its
// retention and its lease are over), its owner's lease is stale: every
// call with it is ErrStaleToken, none brings the record back, and the next
// Begin is Fresh, not a takeover.
func testExpiredLeaseIsStale(t *testing.T, b *bundle) {
	k := b.key(t, "stale-expired")
	r := request(t, `{"a":1}`)
	o := begin(t, b.store, k, r, &idem.BeginOpts{Retention: time.Minute})
	wantKind(t, o, idem.Fresh)
	b.clock.Advance(time.Minute)
	for name, call := range leaseCalls(context.Background(), b.store, k, o.Lease) {
		if err := call(); !errors.Is(err, idem.ErrStaleToken) {
			t.Errorf("%s with the lease of an expired record: %v, want ErrStaleToken", name, err)
		}
		if _, err := b.store.Get(context.Background(), k); !errors.Is(err, idem.ErrNotFound) {
			t.Errorf("Get after the stale %s: %v, want ErrNotFound", name, err)
		}
	}
	n := begin(t, b.store, k, r, nil)
	wantKind(t, n, idem.Fresh)
	if n.TakenOver {
		t.Error("Begin of an expired record reported TakenOver")
	}
}

// testRepeatedSettle: a settle call repeated with the same lease and the
// same value (as after a lost reply) answers nil or ErrStaleToken and
// leaves the record as the first call made it.
func testRepeatedSettle(t *testing.T, b *bundle) {
	ctx := context.Background()
	r := request(t, `{"a":1}`)
	se := idem.StoredError{Class: "declined", Message: "no", Cause: "issuer"}
	for _, c := range []struct {
		name   string
		settle func(k idem.Key, l idem.Lease) error
	}{
		{"Commit", func(k idem.Key, l idem.Lease) error { return b.store.Commit(ctx, k, l, []byte(`{"id":1}`)) }},
		{"FailPermanent", func(k idem.Key, l idem.Lease) error { return b.store.FailPermanent(ctx, k, l, se) }},
		{"FailTransient", func(k idem.Key, l idem.Lease) error { return b.store.FailTransient(ctx, k, l) }},
	} {
		k := b.key(t, "repeat-"+c.name)
		l := fresh(t, b.store, k, r)
		ok(t, c.settle(k, l), c.name)
		first, firstErr := b.store.Get(ctx, k)
		if err := c.settle(k, l); err != nil && !errors.Is(err, idem.ErrStaleToken) {
			t.Errorf("%s repeated: %v, want nil or ErrStaleToken", c.name, err)
		}
		again, againErr := b.store.Get(ctx, k)
		if (firstErr == nil) != (againErr == nil) {
			t.Errorf("Get after the repeated %s: %v, after the first: %v", c.name, againErr, firstErr)
		}
		if diff := cmp.Diff(first, again, recordOpts); diff != "" {
			t.Errorf("the repeated %s changed the record (-first +repeated):\n%s", c.name, diff)
		}
	}
}
