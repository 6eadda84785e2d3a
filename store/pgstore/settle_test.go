package pgstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
	"github.com/idemgo/idem/store/pgstore"
)

// TestRepeatedSettle: repeating a settle call with the same lease and the
// same value (as a caller does when the reply to the first was lost)
// succeeds; any other settle call on a settled lease is stale, and
// changes nothing.
func TestRepeatedSettle(t *testing.T) {
	clock := idemtest.NewClock()
	tb := setup(t, pgstore.Config{Now: clock.Now})
	ctx := ctxT(t)
	ns := idemtest.RandomNamespace(t)
	r := mustRequest(t, `{"a":1}`)
	begin := func(k idem.Key) idem.Lease {
		t.Helper()
		o, err := tb.store.Begin(ctx, k, r, nil)
		if err != nil || o.Kind != idem.Fresh {
			t.Fatalf("Begin = %v, %v", o.Kind, err)
		}
		return o.Lease
	}
	stale := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, idem.ErrStaleToken) {
			t.Errorf("%s: %v, want ErrStaleToken", what, err)
		}
	}

	k := mustKey(t, ns, "commit")
	lease := begin(k)
	result := []byte(`{"b": 2,  "a": 1}`)
	if err := tb.store.Commit(ctx, k, lease, result); err != nil {
		t.Fatal(err)
	}
	if err := tb.store.Commit(ctx, k, lease, result); err != nil {
		t.Errorf("repeated Commit with the same result: %v, want nil", err)
	}
	stale("Commit with another result", tb.store.Commit(ctx, k, lease, []byte(`{"a":1,"b":2}`)))
	stale("FailPermanent after Commit", tb.store.FailPermanent(ctx, k, lease, idem.StoredError{Class: "c"}))
	forged := lease
	forged.Fence++
	stale("repeated Commit with another fence", tb.store.Commit(ctx, k, forged, result))
	if rec, err := tb.store.Get(ctx, k); err != nil || string(rec.Result) != string(result) {
		t.Errorf("record = %s, %v; want the first result", rec.Result, err)
	}

	k = mustKey(t, ns, "fail")
	lease = begin(k)
	se := idem.StoredError{Class: "card.declined", Message: "declined", Cause: "issuer"}
	if err := tb.store.FailPermanent(ctx, k, lease, se); err != nil {
		t.Fatal(err)
	}
	if err := tb.store.FailPermanent(ctx, k, lease, se); err != nil {
		t.Errorf("repeated FailPermanent with the same error: %v, want nil", err)
	}
	stale("FailPermanent with another error", tb.store.FailPermanent(ctx, k, lease, idem.StoredError{Class: "other"}))
	stale("Commit after FailPermanent", tb.store.Commit(ctx, k, lease, []byte(`1`)))

	// A lease that was taken over stays stale, whatever the value.
	k = mustKey(t, ns, "taken-over")
	old := begin(k)
	clock.Advance(idem.DefaultLease)
	lease = begin(k)
	if err := tb.store.Commit(ctx, k, lease, result); err != nil {
		t.Fatal(err)
	}
	stale("Commit with the taken-over lease and the same result", tb.store.Commit(ctx, k, old, result))

	// After the record expired, nothing is current.
	clock.Advance(idem.DefaultRetention)
	stale("repeated Commit after expiry", tb.store.Commit(ctx, k, lease, result))
}

// TestUnstorableToken: a lease whose token PostgreSQL cannot hold as text
// (a NUL, invalid UTF-8) cannot be the current one, so every settle call
// and Heartbeat with it is ErrStaleToken, as with any other lease that is
// not current. Nothing is sent: in transactional mode the caller's
// transaction stays usable, and the owner can still settle in it.
func TestUnstorableToken(t *testing.T) {
	tb := setup(t, pgstore.Config{})
	ctx := ctxT(t)
	r := mustRequest(t, `{"a":1}`)
	runners := map[string]txRunner{"pgx": pgxRunner(tb), "database/sql": sqlRunner(t, tb)}
	lease := map[string]txRunner{"lease": func(ctx context.Context, fn func(idem.Store, func(string, ...any) error) bool) error {
		fn(tb.store, nil)
		return nil
	}}
	for _, modes := range []map[string]txRunner{lease, runners} {
		for mode, run := range modes {
			for _, tok := range []string{"tok\x00en", "tok\xffen"} {
				k := mustKey(t, idemtest.RandomNamespace(t), "token")
				err := run(ctx, func(s idem.Store, _ func(string, ...any) error) bool {
					o, err := s.Begin(ctx, k, r, nil)
					if err != nil || o.Kind != idem.Fresh {
						t.Fatalf("%s: Begin = %v, %v", mode, o.Kind, err)
					}
					bad := o.Lease
					bad.Token = tok
					for name, call := range map[string]func() error{
						"Commit":        func() error { return s.Commit(ctx, k, bad, []byte(`1`)) },
						"FailPermanent": func() error { return s.FailPermanent(ctx, k, bad, idem.StoredError{Class: "c"}) },
						"FailTransient": func() error { return s.FailTransient(ctx, k, bad) },
						"Heartbeat":     func() error { _, err := s.Heartbeat(ctx, k, bad, 0); return err },
					} {
						if err := call(); !errors.Is(err, idem.ErrStaleToken) {
							t.Errorf("%s: %s with token %q: %v, want ErrStaleToken", mode, name, tok, err)
						}
					}
					if err := s.Commit(ctx, k, o.Lease, []byte(`"owner"`)); err != nil {
						t.Errorf("%s: the owner's Commit after the stale calls: %v", mode, err)
					}
					return true
				})
				if err != nil {
					t.Errorf("%s: ending the transaction: %v", mode, err)
				}
				if rec, err := tb.store.Get(ctx, k); err != nil || string(rec.Result) != `"owner"` {
					t.Errorf("%s: record after token %q: %s, %v; want the owner's result", mode, tok, rec.Result, err)
				}
			}
		}
	}
}
