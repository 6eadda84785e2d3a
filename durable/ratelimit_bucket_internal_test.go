package durable

import (
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Two claims that both find a bucket missing (collected while idle) do not
// both spend its full burst: the second, which waited for the first's
// bucket, fails with a unique violation and leases nothing, and repeated,
// finds the tokens the first left. The two queues' pickers lock no row in
// common, so nothing else makes the claims wait for each other.
func TestClaimsRecreatingABucketSpendOneBurst(t *testing.T) {
	cs := newClaimSetup(t, &Config{RateLimits: map[string]RateLimit{"api": {Limit: 1, Period: time.Hour, Burst: 3}}})
	ctx, pool, c, fsm := cs.ctx, cs.pool, cs.c, cs.fsm
	for _, q := range []string{"q1", "q2"} {
		for range 5 {
			if _, err := c.Insert(ctx, fsm.With(struct{}{}), &InsertOpts{Queue: q, RateLimit: "api"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := pool.Exec(ctx, `DELETE FROM durable_rate_limit_bucket`); err != nil { // as bucket GC does
		t.Fatal(err)
	}
	rl, lim := newRateLimits(c.cfg.RateLimits), newKeyLimits(nil)

	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	first, err := claimRated(ctx, tx, "q1", 5, "A", time.Minute, lim, rl, true)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		n   int
		err error
	}
	second := make(chan result, 1)
	go func() {
		r, err := claimRated(ctx, pool, "q2", 5, "B", time.Minute, lim, rl, true)
		second <- result{len(r.rows), err}
	}()
	waitBlockedOn(t, ctx, pool, tx)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-second
	var pe *pgconn.PgError
	if r.err != nil {
		if !errors.As(r.err, &pe) || pe.Code != "23505" || pe.ConstraintName != bucketKeyIndex {
			t.Fatalf("second claim: %v, want a unique violation of %s", r.err, bucketKeyIndex)
		}
		again, err := claimRated(ctx, pool, "q2", 5, "B", time.Minute, lim, rl, true)
		if err != nil {
			t.Fatal(err)
		}
		r.n = len(again.rows)
	}
	var tokens float64
	if err := pool.QueryRow(ctx, `SELECT tokens FROM durable_rate_limit_bucket WHERE key = 'api'`).Scan(&tokens); err != nil {
		t.Fatal(err)
	}
	if total := len(first.rows) + r.n; total != 3 || tokens < -1e-9 {
		t.Fatalf("burst 3: the claims leased %d + %d rows, the bucket holds %.2f tokens; want 3 rows in all", len(first.rows), r.n, tokens)
	}
}
