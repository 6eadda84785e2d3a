package durable

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// A claim whose result cannot be read in full hands back the rows it read:
// its statement leased and committed them, and nobody would run them, or
// extend their leases, until the reaper took them back. A row it could not
// decode, and rows it never read, stay leased until their leases expire.
func TestClaimHandsBackWhatItCannotTake(t *testing.T) {
	for name, tc := range map[string]struct {
		// spoil prepares the claim of rows ids (in pick order) to fail, and
		// returns what to claim on and the rows to be left leased.
		spoil func(t *testing.T, cs claimSetup, ids []int64) (dbtx, []int64)
	}{
		"UndecodableInbox": {func(t *testing.T, cs claimSetup, ids []int64) (dbtx, []int64) {
			// A signal time Go cannot parse makes the inbox of the second
			// row undecodable.
			if _, err := cs.pool.Exec(cs.ctx, `INSERT INTO durable_signal (instance_id, name, payload, inserted_at)
VALUES ($1, 's', 'null', 'infinity')`, ids[1]); err != nil {
				t.Fatal(err)
			}
			return cs.pool, ids[1:2]
		}},
		"ResultCutAfterFirstRow": {func(t *testing.T, cs claimSetup, ids []int64) (dbtx, []int64) {
			return cutRows{cs.pool, 1}, ids[1:]
		}},
	} {
		t.Run(name, func(t *testing.T) {
			cs := newClaimSetup(t, &Config{})
			var ids []int64
			for range 3 {
				id, err := cs.c.Insert(cs.ctx, cs.fsm.With(struct{}{}), &InsertOpts{Queue: "q"})
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, id)
			}
			db, leased := tc.spoil(t, cs, ids)
			got, err := claim(cs.ctx, db, "q", 3, "owner", time.Minute)
			if err == nil || len(got) != 0 {
				t.Fatalf("claim = %d rows, %v; want none and an error", len(got), err)
			}
			for _, id := range ids {
				var status string
				var owner string
				if err := cs.pool.QueryRow(cs.ctx, `SELECT status, coalesce(lease_owner, '') FROM durable_instance WHERE id = $1`, id).Scan(&status, &owner); err != nil {
					t.Fatal(err)
				}
				want := "runnable"
				for _, l := range leased {
					if l == id {
						want = "executing"
					}
				}
				if status != want || (want == "runnable") != (owner == "") {
					t.Errorf("instance %d: %s, leased to %q; want %s", id, status, owner, want)
				}
			}
		})
	}
}

// cutRows is a pool whose query results end in an error after n rows, as
// when the connection drops while they are read; the statement itself
// runs, and commits, in full.
type cutRows struct {
	dbtx
	n int
}

var errCutRows = errors.New("test: result cut")

func (c cutRows) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	rows, err := c.dbtx.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return &cutResult{Rows: rows, left: c.n}, nil
}

type cutResult struct {
	pgx.Rows
	left int
	cut  bool
}

func (r *cutResult) Next() bool {
	if r.left == 0 {
		r.cut = true
		return false
	}
	r.left--
	return r.Rows.Next()
}

func (r *cutResult) Err() error {
	if r.cut {
		return errCutRows
	}
	return r.Rows.Err()
}
