package redisstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/internal/redistest"
)

// TestGetRefusesCorruptRecord: Get reports a record that the store never
// writes, tampered with on the server, as an ErrUnavailable error naming
// the part at fault, instead of returning a Record outside the contract:
// another magic, a status other than the three, an in-progress record
// with a result, parts longer than the value, a fingerprint or a stored
// error that does not decode.
func TestGetRefusesCorruptRecord(t *testing.T) {
	ctx := context.Background()
	client := sharedClient(t)
	setRange := func(off int64, v string) func(string) error {
		return func(key string) error { return client.SetRange(ctx, key, off, v).Err() }
	}
	for _, c := range []struct {
		name   string
		settle string // "commit" or "fail"
		tamper func(key string) error
		part   string
	}{
		{"another magic", "commit", setRange(0, "XDM"), "header"},
		{"unknown status", "commit", setRange(4, "x"), "status"},
		{"in progress with a result", "commit", setRange(4, "p"), "tail"},
		{"failed with a result that is no error", "commit", setRange(4, "f"), "error"},
		{"another fingerprint version", "fail", setRange(46, "\x00"), "fingerprint"},
		{"truncated", "fail", func(key string) error {
			v, err := client.Get(ctx, key).Result()
			if err != nil {
				return err
			}
			return client.Set(ctx, key, v[:50], redis.KeepTTL).Err()
		}, "lengths"},
		{"too short for a header", "fail", func(key string) error { return client.Set(ctx, key, "IDM\x01p", redis.KeepTTL).Err() }, "header"},
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
				err = s.Commit(ctx, key, o.Lease, []byte(`[1]`))
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
				t.Fatalf("record %s: exists %d, %v", rkey, n, err)
			}
			if err := c.tamper(rkey); err != nil {
				t.Fatal(err)
			}
			rec, err := s.Get(ctx, key)
			if !rec.Key.IsZero() || !errors.Is(err, idem.ErrUnavailable) || !strings.Contains(err.Error(), "part "+c.part+":") {
				t.Fatalf("Get = %#v, %v; want an ErrUnavailable error naming part %s", rec, err, c.part)
			}
		})
	}
}
