package pgstore_test

import (
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
