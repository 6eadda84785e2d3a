package consumer_test

import (
	"context"
	"errors"
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/consumer"
	"github.com/idemgo/idem/store/memstore"
)

// TestStoreLedgerForeignRecordIsNotADuplicate: a key whose record in the
// store was not written by a consumer (the namespace is shared with, say, an
// HTTP endpoint's idempotency keys, which record other fingerprints) is not
// taken for a message handled before. The message fails with an error
// wrapping idem.ErrMismatch and is left for redelivery, instead of being
// acknowledged as a Duplicate whose handler never ran.
func TestStoreLedgerForeignRecordIsNotADuplicate(t *testing.T) {
	ctx := context.Background()
	s, err := memstore.New(memstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ns := idem.MustNamespace("orders")
	foreign := idem.Request{Fingerprint: idem.FingerprintBytes([]byte("POST /orders {...}"))}
	for _, tc := range []struct {
		name   string
		key    string
		settle func(idem.Key, idem.Lease) error
	}{
		{"committed", "k1", func(k idem.Key, l idem.Lease) error { return s.Commit(ctx, k, l, []byte(`{"id":1}`)) }},
		{"failed permanently", "k2", func(k idem.Key, l idem.Lease) error {
			return s.FailPermanent(ctx, k, l, idem.StoredError{Message: "declined"})
		}},
		{"in flight", "k3", func(idem.Key, idem.Lease) error { return nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := idem.ParseKey(ns, tc.key)
			if err != nil {
				t.Fatal(err)
			}
			o, err := s.Begin(ctx, k, foreign, nil)
			if err != nil || o.Kind != idem.Fresh {
				t.Fatalf("Begin: %v %v", o.Kind, err)
			}
			if err := tc.settle(k, o.Lease); err != nil {
				t.Fatal(err)
			}
			runs := 0
			c, err := consumer.New(consumer.Config[msg]{
				Ledger: consumer.StoreLedger(s, ns, nil),
				Key:    func(m msg) (string, error) { return m.ID, nil },
				Handle: func(context.Context, msg) error { runs++; return nil },
			})
			if err != nil {
				t.Fatal(err)
			}
			out, err := c.Handle(ctx, msg{ID: tc.key})
			if out.Ack() || !errors.Is(err, idem.ErrMismatch) || runs != 0 {
				t.Errorf("Handle = %s, %v, %d runs; want not acknowledged, an error wrapping idem.ErrMismatch, no run", out, err, runs)
			}
		})
	}
}
