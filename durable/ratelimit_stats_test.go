package durable_test

import (
	"testing"
	"time"

	"github.com/idemgo/idem/durable"
)

// RateLimitStats shows each bucket's tokens (refilled at the client's rate,
// or as stored for a name it does not know) and the rows waiting on it;
// Get shows an instance's bucket and weight.
func TestRateLimitStats(t *testing.T) {
	t.Parallel()
	fsm := rlFSM(t, newStarts())
	b := setup(t, rlConfig(fsm, nil, map[string]durable.RateLimit{"api": {Limit: 10, Burst: 4}}))
	insertLimited(t, b, fsm, "api:a", 3, 2)
	insertLimited(t, b, fsm, "other", 1, 1)
	// A bucket drawn down an hour ago has long refilled to its burst; one
	// drawn just now has not.
	b.exec(t, `INSERT INTO durable_rate_limit_bucket (key, tokens, updated_at) VALUES
		('api:old', -2, now() - interval '1 hour'), ('api:now', 1, now() + interval '1 hour')`)

	stats, err := b.client.RateLimitStats(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]durable.BucketStats{}
	for _, s := range stats {
		got[s.Key] = s
	}
	for key, want := range map[string]struct {
		tokens  float64
		known   bool
		waiting int
	}{
		"api:a":   {4, true, 2}, // created full by the insert
		"api:old": {4, true, 0},
		"api:now": {1, true, 0},
		"other":   {0, false, 1}, // created full, but its size is unknown here
	} {
		s, ok := got[key]
		if !ok || s.Tokens != want.tokens || s.Known != want.known || s.Waiting != want.waiting {
			t.Errorf("bucket %s: %+v (found %v), want tokens %v known %v waiting %d", key, s, ok, want.tokens, want.known, want.waiting)
		}
	}
	if len(stats) != 4 {
		t.Errorf("%d buckets, want 4: %+v", len(stats), stats)
	}

	id := b.insert(t, fsm.With(rlState{}), &durable.InsertOpts{RateLimit: durable.RateLimitKey("api", "b"), RateLimitWeight: 2})
	if in := b.get(t, id); in.RateLimit != "api:b" || in.RateLimitWeight != 2 || in.Reaps != 0 {
		t.Fatalf("instance: rate limit %q, weight %d, reaps %d", in.RateLimit, in.RateLimitWeight, in.Reaps)
	}
}

// Garbage collection deletes the idle buckets that would be full by now,
// which changes nothing (a missing bucket is a full one), and keeps those
// still refilling, those drawn from lately, and those of unknown names
// until GCRetention.
func TestRateLimitBucketsCollected(t *testing.T) {
	t.Parallel()
	fsm := rlFSM(t, newStarts())
	cfg := rlConfig(fsm, nil, map[string]durable.RateLimit{"api": {Limit: 1, Period: 24 * time.Hour, Burst: 10}})
	cfg.GCRetention, cfg.GCInterval, cfg.GCBatch = 2*time.Hour, 20*time.Millisecond, 2
	b := setup(t, cfg)
	b.exec(t, `INSERT INTO durable_rate_limit_bucket (key, tokens, updated_at) VALUES
		('api:full', NULL, now() - interval '1 hour'),     -- never drawn from
		('api:refilled', 9.99, now() - interval '1 hour'),  -- gained 0.04 since
		('api:draining', 2, now() - interval '1 hour'),     -- still refilling
		('api:fresh', 10, now() + interval '1 hour'),        -- full, but drawn from within GCInterval
		('gone:old', 0, now() - interval '3 hours'),         -- no limit of that name, past GCRetention
		('gone:new', 0, now() - interval '1 hour'),
		('api:a', NULL, now() - interval '1 hour'), ('api:b', NULL, now() - interval '1 hour'),
		('api:c', NULL, now() - interval '1 hour')`) // more than one batch
	b.start(t)

	waitFor(t, "idle full buckets deleted", func() bool {
		return b.count(t, "SELECT count(*) FROM durable_rate_limit_bucket") == 3
	})
	if n := b.count(t, "SELECT count(*) FROM durable_rate_limit_bucket WHERE key IN ('api:draining', 'api:fresh', 'gone:new')"); n != 3 {
		t.Fatalf("kept %d of the 3 buckets that must stay", n)
	}
}
