package idemtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemgo/idem"
)

// unreachableWithin is how long a call to an unreachable store may take to
// fail: long enough for a connect attempt on a loaded machine, short
// enough that a caller is not left hanging.
const unreachableWithin = 20 * time.Second

// testUnreachable: with the database out of reach, every call of s fails
// with ErrUnavailable, promptly and without a panic, and bad arguments are
// still reported as bad arguments.
func testUnreachable(t *testing.T, s idem.Store) {
	ns := RandomNamespace(t)
	k, err := idem.ParseKey(ns, "outage-1")
	if err != nil {
		t.Fatal(err)
	}
	req := request(t, `{"amount":1}`)
	lease := idem.Lease{Token: "idemtest-unreachable", Fence: 1, ExpiresAt: time.Now().Add(Lease), TTL: Lease}

	calls := []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"Begin", func(ctx context.Context) error { _, err := s.Begin(ctx, k, req, nil); return err }},
		{"Commit", func(ctx context.Context) error { return s.Commit(ctx, k, lease, []byte(`{"id":1}`)) }},
		{"FailPermanent", func(ctx context.Context) error {
			return s.FailPermanent(ctx, k, lease, idem.StoredError{Class: "c", Message: "m"})
		}},
		{"FailTransient", func(ctx context.Context) error { return s.FailTransient(ctx, k, lease) }},
		{"Heartbeat", func(ctx context.Context) error { _, err := s.Heartbeat(ctx, k, lease, 0); return err }},
		{"Get", func(ctx context.Context) error { _, err := s.Get(ctx, k); return err }},
		{"PurgeExpired", func(ctx context.Context) error { _, err := s.PurgeExpired(ctx, ns, time.Now()); return err }},
	}
	for _, c := range calls {
		ctx, cancel := context.WithTimeout(context.Background(), unreachableWithin)
		start := time.Now()
		err := callNoPanic(t, c.name, func() error { return c.call(ctx) })
		took := time.Since(start)
		cancel()
		switch {
		case !errors.Is(err, idem.ErrUnavailable):
			t.Errorf("%s with the database unreachable: %v, want an error matching ErrUnavailable", c.name, err)
		case took >= unreachableWithin:
			t.Errorf("%s took %s to fail: it waited for its context, not for the database", c.name, took)
		}
	}

	// Bad arguments are bad whatever the database's state.
	ctx, cancel := context.WithTimeout(context.Background(), unreachableWithin)
	defer cancel()
	if err := s.Commit(ctx, k, lease, []byte(`{`)); !errors.Is(err, idem.ErrInvalidPayload) {
		t.Errorf("Commit of invalid JSON with the database unreachable: %v, want ErrInvalidPayload", err)
	}
	if _, err := s.Begin(ctx, idem.Key{}, req, nil); !errors.Is(err, idem.ErrInvalidKey) {
		t.Errorf("Begin with the zero Key with the database unreachable: %v, want ErrInvalidKey", err)
	}
}

// callNoPanic runs call and turns a panic into a test failure.
func callNoPanic(t *testing.T, name string, call func() error) (err error) {
	t.Helper()
	defer func() {
		if p := recover(); p != nil {
			t.Errorf("%s panicked: %v", name, p)
			err = nil
		}
	}()
	return call()
}
