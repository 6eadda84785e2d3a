package redisstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
	"github.com/idemgo/idem/internal/redistest"
	"github.com/idemgo/idem/store/redisstore"
)

// TestSettleRefusedChangesNothing: a settle whose value the server
// refuses to append (the record would grow past the server's
// proto-max-bulk-len, which an operator may set below the 512 MiB
// default) fails with ErrUnavailable and leaves the record in progress,
// as it was: not committed or failed without its result or error, which
// every later Begin would replay. The owner can still settle it with a
// smaller value.
func TestSettleRefusedChangesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := redistest.Start(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = client.Close() })
	// The smallest proto-max-bulk-len Redis takes: a request and a result
	// of 600 KiB each pass alone, but not together in one record.
	if err := client.ConfigSet(ctx, "proto-max-bulk-len", "1mb").Err(); err != nil {
		t.Fatal(err)
	}
	s, err := redisstore.New(client, redisstore.Config{MaxPayload: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	ns := idemtest.RandomNamespace(t)
	large := func(c string) []byte { return []byte(`"` + strings.Repeat(c, 600<<10) + `"`) }
	req := mustRequest(t, string(large("q")))
	for _, settle := range []string{"commit", "fail permanent"} {
		t.Run(settle, func(t *testing.T) {
			key := mustKey(t, ns, settle)
			o, err := s.Begin(ctx, key, req, nil)
			if err != nil || o.Kind != idem.Fresh {
				t.Fatalf("Begin = %v, %v", o.Kind, err)
			}
			if settle == "commit" {
				err = s.Commit(ctx, key, o.Lease, large("r"))
			} else {
				err = s.FailPermanent(ctx, key, o.Lease, idem.StoredError{Class: "c", Message: strings.Repeat("m", 600<<10)})
			}
			if !errors.Is(err, idem.ErrUnavailable) {
				t.Fatalf("%s of a value the server refuses to append: %v, want ErrUnavailable", settle, err)
			}
			rec, err := s.Get(ctx, key)
			if err != nil || rec.Status != idem.StatusInProgress || rec.Result != nil || rec.Error != nil {
				t.Fatalf("record after the refused %s: %s %q %v, %v; want it in progress, as it was", settle, rec.Status, rec.Result, rec.Error, err)
			}
			if o, err := s.Begin(ctx, key, req, nil); err != nil || o.Kind != idem.InFlight {
				t.Errorf("Begin after the refused %s = %v, %v; want InFlight", settle, o.Kind, err)
			}
			if err := s.Commit(ctx, key, o.Lease, []byte(`"small"`)); err != nil {
				t.Fatalf("Commit of a smaller result: %v", err)
			}
			if o, err := s.Begin(ctx, key, req, nil); err != nil || o.Kind != idem.PriorResult || string(o.Result) != `"small"` {
				t.Errorf("Begin after the Commit = %v %q, %v; want the smaller result", o.Kind, o.Result, err)
			}
		})
	}
}
