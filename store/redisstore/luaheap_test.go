package redisstore_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
	"github.com/idemgo/idem/internal/redistest"
	"github.com/idemgo/idem/store/redisstore"
)

// TestLargeRecordsStayOutOfLua: a Begin that finds a record of 8 MiB (a
// result, a stored error, or a recorded request of another fingerprint)
// answers with its bytes, on both paths of Begin's script, without
// copying the record into the server's Lua heap (used_memory_lua, which
// maxmemory does not count and which stays grown until Lua's collector
// runs): the heap grows by less than 1 MiB. The Begins send a small
// request, as the request a Begin sends is itself one of the script's
// arguments.
func TestLargeRecordsStayOutOfLua(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := redistest.Start(t) // a server of its own: its Lua heap is this test's alone
	client := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = client.Close() })
	const size = 8 << 20
	const bound = 1 << 20
	big := func(c string) []byte { return []byte(`"` + strings.Repeat(c, size-2) + `"`) }
	result, bigRequest := big("r"), big("q")
	stored := idem.StoredError{Class: "declined", Message: strings.Repeat("m", size)}
	small, other := mustRequest(t, `{"n":1}`), mustRequest(t, `{"n":2}`)
	// luaHeap empties the Lua heap (SCRIPT FLUSH makes a new interpreter),
	// warms it up with a Begin of an absent key, which loads the script,
	// and returns the heap's size; after then returns its growth since.
	luaHeap := func(t *testing.T, s *redisstore.Store) int {
		t.Helper()
		if err := client.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Begin(ctx, mustKey(t, idemtest.RandomNamespace(t), "warm-up"), small, nil); err != nil {
			t.Fatal(err)
		}
		info, err := client.Info(ctx, "memory").Result()
		if err != nil {
			t.Fatal(err)
		}
		return infoField(info, "used_memory_lua")
	}
	check := func(t *testing.T, s *redisstore.Store, what string, begin func() (idem.Outcome, error), want func(idem.Outcome) bool) {
		t.Helper()
		base := luaHeap(t, s)
		o, err := begin()
		if err != nil || !want(o) {
			t.Errorf("%s: %v (result of %d bytes, recorded request of %d, error %v), %v; want it with the recorded bytes",
				what, o.Kind, len(o.Result), len(o.RecordedRequest), o.Error != nil, err)
		}
		info, err := client.Info(ctx, "memory").Result()
		if err != nil {
			t.Fatal(err)
		}
		if grown := infoField(info, "used_memory_lua") - base; grown > bound {
			t.Errorf("%s: the Lua heap grew by %d bytes, want less than %d", what, grown, bound)
		}
	}
	for _, getFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("getFirst=%v", getFirst), func(t *testing.T) {
			s, err := redisstore.New(client, redisstore.Config{MaxPayload: size + 1024})
			if err != nil {
				t.Fatal(err)
			}
			if getFirst {
				redisstore.BeginByGet(s)
			}
			ns := idemtest.RandomNamespace(t)
			settle := func(value string, req idem.Request, settle func(idem.Key, idem.Lease) error) idem.Key {
				t.Helper()
				key := mustKey(t, ns, value)
				o, err := s.Begin(ctx, key, req, nil)
				if err != nil || o.Kind != idem.Fresh {
					t.Fatalf("Begin = %v, %v", o.Kind, err)
				}
				if err := settle(key, o.Lease); err != nil {
					t.Fatal(err)
				}
				return key
			}
			committed := settle("committed", small, func(k idem.Key, l idem.Lease) error { return s.Commit(ctx, k, l, result) })
			failed := settle("failed", small, func(k idem.Key, l idem.Lease) error { return s.FailPermanent(ctx, k, l, stored) })
			inProgress := settle("large-request", mustRequest(t, string(bigRequest)), func(idem.Key, idem.Lease) error { return nil })

			check(t, s, "replay of a large result", func() (idem.Outcome, error) { return s.Begin(ctx, committed, small, nil) },
				func(o idem.Outcome) bool { return o.Kind == idem.PriorResult && bytes.Equal(o.Result, result) })
			check(t, s, "replay of a large error", func() (idem.Outcome, error) { return s.Begin(ctx, failed, small, nil) },
				func(o idem.Outcome) bool { return o.Kind == idem.PriorError && o.Error != nil && *o.Error == stored })
			check(t, s, "Mismatch with a large result", func() (idem.Outcome, error) { return s.Begin(ctx, committed, other, nil) },
				func(o idem.Outcome) bool {
					return o.Kind == idem.Mismatch && string(o.RecordedRequest) == `{"n":1}` && o.RecordedHash == small.Fingerprint
				})
			check(t, s, "Mismatch with a large request", func() (idem.Outcome, error) { return s.Begin(ctx, inProgress, other, nil) },
				func(o idem.Outcome) bool {
					return o.Kind == idem.Mismatch && bytes.Equal(o.RecordedRequest, bigRequest)
				})
		})
	}
}
