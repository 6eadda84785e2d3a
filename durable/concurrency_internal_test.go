package durable

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem/internal/pgtest"
)

// claimSetup is what the claim tests run on: a fresh schema, a pool to it,
// a migrated client with cfg, and an FSM of one step that does nothing.
type claimSetup struct {
	ctx  context.Context
	pool *pgxpool.Pool
	c    *Client
	fsm  *FSM[struct{}]
}

func newClaimSetup(t *testing.T, cfg *Config) claimSetup {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	pool, err := pgxpool.New(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	c, err := NewClient(pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	noop := func(context.Context, *Step[struct{}]) (Outcome, error) { return Done(nil), nil }
	fsm, err := NewFSM(FSMConfig[struct{}]{Name: "claim", Initial: "a", Steps: map[string]StepFunc[struct{}]{"a": noop}})
	if err != nil {
		t.Fatal(err)
	}
	return claimSetup{ctx, pool, c, fsm}
}

// TestConcurrencyClaimRace makes a picker lose the race for a key's slot:
// another transaction leased a row of the key and has not committed, so
// the picker's snapshot does not see it executing and gives its own row of
// the key the same slot. The unique index makes it wait for the winner and
// fail; claimRows takes that as "skip the key this time": no error, no row,
// and a contention event counting the race.
func TestConcurrencyClaimRace(t *testing.T) {
	var (
		mu  sync.Mutex
		evs []ConcurrencyContendedEvent
	)
	cs := newClaimSetup(t, &Config{Hooks: Hooks{ConcurrencyContended: func(ev ConcurrencyContendedEvent) {
		mu.Lock()
		evs = append(evs, ev)
		mu.Unlock()
	}}})
	ctx, pool, c, fsm := cs.ctx, cs.pool, cs.c, cs.fsm
	for range 2 {
		if _, err := c.Insert(ctx, fsm.With(struct{}{}), &InsertOpts{Queue: "q", ConcurrencyKey: "k"}); err != nil {
			t.Fatal(err)
		}
	}

	// The winner: leased, not committed.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	won, err := claim(ctx, tx, "q", 1, "winner", time.Minute)
	if err != nil || len(won) != 1 {
		t.Fatalf("winner's claim: %d rows, %v", len(won), err)
	}

	// The raw statement of the loser fails on the index once the winner
	// commits...
	loser := make(chan error, 1)
	go func() {
		_, err := claim(ctx, pool, "q", 1, "loser", time.Minute)
		loser <- err
	}()
	waitBlockedOn(t, ctx, pool, tx)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var pe *pgconn.PgError
	if err := <-loser; !errors.As(err, &pe) || pe.Code != "23505" || pe.ConstraintName != concurrencyIndex {
		t.Fatalf("loser's claim: %v, want a unique violation of %s", err, concurrencyIndex)
	}

	// The same race with the picker as the loser, on another key: it
	// repeats the statement, sees the key taken and skips it.
	for range 2 {
		if _, err := c.Insert(ctx, fsm.With(struct{}{}), &InsertOpts{Queue: "q", ConcurrencyKey: "k2"}); err != nil {
			t.Fatal(err)
		}
	}
	tx2, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx2.Rollback(ctx) }()
	if won, err := claim(ctx, tx2, "q", 1, "winner", time.Minute); err != nil || len(won) != 1 {
		t.Fatalf("second winner's claim: %d rows, %v", len(won), err)
	}
	type result struct {
		cs  []*claimed
		err error
	}
	picked := make(chan result, 1)
	q := &queue{e: &engine{c: c, owner: "picker"}, name: "q"}
	go func() {
		cs, err := q.claimRows(ctx, 4)
		picked <- result{cs, err}
	}()
	waitBlockedOn(t, ctx, pool, tx2)
	if err := tx2.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if r := <-picked; r.err != nil || len(r.cs) != 0 {
		t.Fatalf("claimRows: %d rows, %v; want none and no error", len(r.cs), r.err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(evs) != 2 {
		t.Fatalf("contention events %+v, want one for k and one for k2", evs)
	}
	for i, k := range []string{"k", "k2"} {
		if ev := evs[i]; ev.Key != k || ev.Count != 1 || ev.Limit != 1 || ev.Races != 1 || ev.Queue != "q" || ev.Worker != "picker" {
			t.Fatalf("contention event %+v", ev)
		}
	}
}

// waitBlockedOn waits until a session waits for tx's transaction (on the
// unique index entry of the row it leased).
func waitBlockedOn(t *testing.T, ctx context.Context, pool *pgxpool.Pool, tx pgx.Tx) {
	t.Helper()
	var xid int64
	if err := tx.QueryRow(ctx, "SELECT txid_current()").Scan(&xid); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks
			WHERE NOT granted AND locktype = 'transactionid' AND transactionid::text = ($1 % 4294967296)::text`, xid).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting for the loser to wait on the winner")
		}
	}
}
