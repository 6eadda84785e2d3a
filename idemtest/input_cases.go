package idemtest

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
)

// testEveryCallChecksKey: every call taking a key rejects the zero Key
// with ErrInvalidKey, and every call taking a lease rejects one without a
// token, or with a token no record can hold, with ErrStaleToken, before
// anything is written.
func testEveryCallChecksKey(t *testing.T, b *bundle) {
	ctx := context.Background()
	k := b.key(t, "checked")
	r := request(t, `{}`)
	lease := fresh(t, b.store, k, r)
	zero := idem.Key{}
	for name, err := range map[string]error{
		"Begin":         func() error { _, err := b.store.Begin(ctx, zero, r, nil); return err }(),
		"Commit":        b.store.Commit(ctx, zero, lease, []byte(`1`)),
		"FailPermanent": b.store.FailPermanent(ctx, zero, lease, idem.StoredError{Class: "c"}),
		"FailTransient": b.store.FailTransient(ctx, zero, lease),
		"Heartbeat":     func() error { _, err := b.store.Heartbeat(ctx, zero, lease, 0); return err }(),
		"Get":           func() error { _, err := b.store.Get(ctx, zero); return err }(),
	} {
		if !errors.Is(err, idem.ErrInvalidKey) {
			t.Errorf("%s with the zero Key: %v, want ErrInvalidKey", name, err)
		}
	}
	noToken := lease
	noToken.Token = ""
	for name, call := range leaseCalls(ctx, b.store, k, noToken) {
		if err := call(); !errors.Is(err, idem.ErrStaleToken) {
			t.Errorf("%s with a lease without a token: %v, want ErrStaleToken", name, err)
		}
	}
	// A token no record can hold (a NUL, invalid UTF-8) is not current
	// either; it must not reach a backend that would take it for a bad
	// payload, or abort the caller's transaction.
	for what, token := range map[string]string{"a NUL": lease.Token + "\x00", "invalid UTF-8": "\xff" + lease.Token} {
		bad := lease
		bad.Token = token
		for name, call := range leaseCalls(ctx, b.store, k, bad) {
			if err := call(); !errors.Is(err, idem.ErrStaleToken) {
				t.Errorf("%s with a token holding %s: %v, want ErrStaleToken", name, what, err)
			}
		}
	}
	if rec := get(t, b.store, k); rec.Status != idem.StatusInProgress || !sameTime(rec.LeaseExpiresAt, lease.ExpiresAt) {
		t.Errorf("record after rejected calls = %s, lease until %v; want in_progress until %v", rec.Status, rec.LeaseExpiresAt, lease.ExpiresAt)
	}
}

// testDeadlineExceeded: a ctx whose deadline has passed gives an error
// satisfying errors.Is(err, context.DeadlineExceeded) from every call,
// which changes nothing.
func testDeadlineExceeded(t *testing.T, b *bundle) {
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	r := request(t, `{}`)
	k := b.key(t, "deadline")
	lease := fresh(t, b.store, k, r)
	k2 := b.key(t, "deadline-new")
	calls := leaseCalls(ctx, b.store, k, lease)
	calls["Begin"] = func() error { _, err := b.store.Begin(ctx, k2, r, nil); return err }
	calls["Get"] = func() error { _, err := b.store.Get(ctx, k); return err }
	calls["PurgeExpired"] = func() error { _, err := b.store.PurgeExpired(ctx, b.ns, b.clock.Now().Add(2*Retention)); return err }
	for name, call := range calls {
		if err := call(); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s with an expired deadline: %v, want context.DeadlineExceeded", name, err)
		}
	}
	if rec := get(t, b.store, k); rec.Status != idem.StatusInProgress || !sameTime(rec.LeaseExpiresAt, lease.ExpiresAt) {
		t.Errorf("record after the calls = %s, lease until %v; want in_progress until %v", rec.Status, rec.LeaseExpiresAt, lease.ExpiresAt)
	}
	if _, err := b.store.Get(context.Background(), k2); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("Begin with an expired deadline left a record: %v", err)
	}
}

// testPayloadAtLimit: a request payload, a result and an encoded stored
// error of exactly the limit are accepted, and replayed whole.
func testPayloadAtLimit(t *testing.T, b *bundle) {
	if b.h.MaxPayload <= 0 {
		t.Skip("Harness.MaxPayload not set")
	}
	ctx := context.Background()
	exact := []byte(`"` + strings.Repeat("x", b.h.MaxPayload-2) + `"`)
	r := request(t, string(exact))
	k := b.key(t, "at-limit")
	lease := fresh(t, b.store, k, r)
	ok(t, b.store.Commit(ctx, k, lease, exact), "Commit of a result of exactly MaxPayload bytes")
	if o := begin(t, b.store, k, r, nil); o.Kind != idem.PriorResult || string(o.Result) != string(exact) {
		t.Errorf("replay = %s of %d bytes, want the %d-byte result", o.Kind, len(o.Result), len(exact))
	}

	empty, err := json.Marshal(idem.StoredError{Class: "c"})
	ok(t, err, "json.Marshal")
	se := idem.StoredError{Class: "c", Message: strings.Repeat("m", b.h.MaxPayload-len(empty))}
	k2 := b.key(t, "at-limit-error")
	lease = fresh(t, b.store, k2, r)
	ok(t, b.store.FailPermanent(ctx, k2, lease, se), "FailPermanent of an error of exactly MaxPayload bytes encoded")
	if o := begin(t, b.store, k2, r, nil); o.Kind != idem.PriorError || o.Error == nil || *o.Error != se {
		t.Errorf("replay = %s, want the error recorded whole", o.Kind)
	}
}
