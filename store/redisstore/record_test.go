package redisstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/internal/redistest"
)

// TestGetRefusesCorruptRecord: Get reports a record hash that the store
// never writes, tampered with on the server, as an ErrUnavailable error
// naming the field at fault, as it does for a field that does not decode,
// instead of returning a Record outside the contract: a status other than
// the three, a committed record without its result, a failed one without
// its error.
func TestGetRefusesCorruptRecord(t *testing.T) {
	ctx := context.Background()
	client := sharedClient(t)
	for _, c := range []struct {
		name   string
		settle string // "commit" or "fail"
		tamper func(key string) error
		field  string
	}{
		{"unknown status", "commit", func(key string) error { return client.HSet(ctx, key, "st", "bogus").Err() }, "st"},
		{"empty status", "fail", func(key string) error { return client.HSet(ctx, key, "st", "").Err() }, "st"},
		{"committed without result", "commit", func(key string) error { return client.HDel(ctx, key, "res").Err() }, "res"},
		{"failed without error", "fail", func(key string) error { return client.HDel(ctx, key, "err").Err() }, "err"},
		{"failed with the result only", "commit", func(key string) error {
			return client.HSet(ctx, key, "st", "failed_permanent").Err()
		}, "err"},
	} {
		t.Run(c.name, func(t *testing.T) {
			prefix := redistest.Prefix(t)
			s := newStore(t, client, prefix, time.Now)
			key, err := idem.ParseKey(idem.MustNamespace("ns"), "k1")
			if err != nil {
				t.Fatal(err)
			}
			req, err := idem.NewRequest([]byte(`{"a":1}`))
			if err != nil {
				t.Fatal(err)
			}
			o, err := s.Begin(ctx, key, req, nil)
			if err != nil || o.Kind != idem.Fresh {
				t.Fatalf("Begin = %v, %v", o.Kind, err)
			}
			if c.settle == "commit" {
				err = s.Commit(ctx, key, o.Lease, []byte(`{"id":1}`))
			} else {
				err = s.FailPermanent(ctx, key, o.Lease, idem.StoredError{Class: "c", Message: "m"})
			}
			if err != nil {
				t.Fatal(err)
			}
			if rec, err := s.Get(ctx, key); err != nil || rec.Key != key {
				t.Fatalf("Get before tampering = %v, %v", rec, err)
			}
			rkey := prefix + "ns:0::k1" // see recordKey
			if n, err := client.Exists(ctx, rkey).Result(); err != nil || n != 1 {
				t.Fatalf("record hash %s: exists %d, %v", rkey, n, err)
			}
			if err := c.tamper(rkey); err != nil {
				t.Fatal(err)
			}
			rec, err := s.Get(ctx, key)
			if !rec.Key.IsZero() || !errors.Is(err, idem.ErrUnavailable) || !strings.Contains(err.Error(), "field "+c.field+":") {
				t.Fatalf("Get = %#v, %v; want an ErrUnavailable error naming field %s", rec, err, c.field)
			}
		})
	}
}
