package pgstore_test

import (
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
	"github.com/idemgo/idem/internal/pgtest"
	"github.com/idemgo/idem/store/pgstore"
)

// TestPurgeAsOfBeyondTimestamptz: an asOf later than timestamptz can hold
// (as a "purge everything" might pass) purges every record of the
// namespace, in lease mode and in a caller's transaction, which it leaves
// usable; one earlier than that range purges nothing. Sent as is, such a
// time overflowed pgx's encoding, into 1970 or a date the server refused.
func TestPurgeAsOfBeyondTimestamptz(t *testing.T) {
	tb := setup(t, pgstore.Config{})
	ctx := ctxT(t)
	r := mustRequest(t, `{}`)
	for _, asOf := range []time.Time{
		time.Unix(1<<62, 0),
		time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-5000, 1, 1, 0, 0, 0, 0, time.UTC),
	} {
		ns := idemtest.RandomNamespace(t)
		for _, v := range []string{"a", "b"} {
			if _, err := tb.store.Begin(ctx, mustKey(t, ns, v), r, nil); err != nil {
				t.Fatal(err)
			}
		}
		want := 2
		if asOf.Year() < 0 {
			want = 0
		}
		if n, err := tb.store.PurgeExpired(ctx, ns, asOf); err != nil || n != want {
			t.Errorf("PurgeExpired(%d-…) = %d, %v; want %d", asOf.Year(), n, err, want)
		}

		ns = idemtest.RandomNamespace(t)
		tx, err := tb.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		s := tb.store.WithTx(tx)
		if _, err := s.Begin(ctx, mustKey(t, ns, "a"), r, nil); err != nil {
			t.Fatal(err)
		}
		if n, err := s.PurgeExpired(ctx, ns, asOf); err != nil || n != min(want, 1) {
			t.Errorf("PurgeExpired(%d-…) in a transaction = %d, %v; want %d", asOf.Year(), n, err, min(want, 1))
		}
		if _, err := s.Get(ctx, mustKey(t, ns, "a")); err != nil && !errors.Is(err, idem.ErrNotFound) {
			t.Errorf("the transaction after PurgeExpired: %v", err)
		}
		_ = tx.Rollback(ctx)
	}
}

// TestPurgeReadsOnlyItsNamespace: purging a namespace reads the index
// entries of that namespace, not those of the others' expired records.
// With expiry indexed by expires_at first, every batch walked, in expiry
// order, the expired records of every namespace not purged yet (one the
// application no longer uses, say) before reaching its own: the index
// blocks a purge read grew with the other namespaces' records, times the
// number of batches.
func TestPurgeReadsOnlyItsNamespace(t *testing.T) {
	url := pgtest.URL(t)
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	pc.MaxConns = 1 // the purge runs on the connection whose statistics are flushed below
	pool, err := pgxpool.NewWithConfig(ctxT(t), pc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s, err := pgstore.New(pool, pgstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	// The other namespace's records expired a year before any of ns's.
	const own, others = 10_000, 100_000
	insert := func(ns string, n int, from string) {
		t.Helper()
		if _, err := pool.Exec(ctx, `INSERT INTO idempotency_record
			(namespace, key_value, request_hash, request_payload, status, result_payload, owner_token, fence, created_at, expires_at)
			SELECT $1::text, 'k' || i, '\x00', '{}', 'committed', '1', 't', 1,
			       $3::timestamptz, $3::timestamptz + i * interval '1 second'
			FROM generate_series(1, $2::int) AS i`, ns, n, from); err != nil {
			t.Fatal(err)
		}
	}
	insert("abandoned", others, "2000-01-01")
	ns := idemtest.RandomNamespace(t)
	insert(string(ns), own, "2001-01-01")
	if _, err := pool.Exec(ctx, "ANALYZE idempotency_record"); err != nil {
		t.Fatal(err)
	}

	// expiryIndexBlocks is how many blocks of the table's indexes but the
	// primary key have been read, from the cache or not, once this
	// connection's statistics are flushed (which pg_stat_force_next_flush
	// makes happen before the server answers).
	expiryIndexBlocks := func() int64 {
		t.Helper()
		if _, err := pool.Exec(ctx, "SELECT pg_stat_force_next_flush()"); err != nil {
			t.Fatal(err)
		}
		var n int64
		if err := pool.QueryRow(ctx, `SELECT coalesce(sum(idx_blks_read + idx_blks_hit), 0)::bigint
			FROM pg_statio_user_indexes
			WHERE relid = 'idempotency_record'::regclass AND indexrelname <> 'idempotency_record_pkey'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := expiryIndexBlocks()
	n, err := s.PurgeExpired(ctx, ns, time.Date(2002, 1, 1, 0, 0, 0, 0, time.UTC))
	if err != nil || n != own {
		t.Fatalf("PurgeExpired = %d, %v; want %d", n, err, own)
	}
	read := expiryIndexBlocks() - before
	// The namespace's own entries fill about 50 blocks, which its 11
	// batches read again and again (deleted entries stay in the index until
	// it is vacuumed): a few hundred blocks. Walking the other namespace's
	// entries once reads about 500.
	if read > 1000 {
		t.Errorf("purging %d records read %d blocks of the expiry index: it walks other namespaces' records", own, read)
	}
	t.Logf("purging %d records read %d blocks of the expiry index", own, read)
	var left int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM idempotency_record WHERE namespace = 'abandoned'`).Scan(&left); err != nil || left != others {
		t.Fatalf("the other namespace has %d records, %v; want %d", left, err, others)
	}
}

// TestPurgeSparesTakenOverRecords: while a purge deletes a namespace's
// expired records, Begins take some of them over (an expired record is
// absent, so each answers Fresh). No record a Begin reserved is deleted by
// the purge: the purge re-checks expiry on the newest version of each row
// it locks, and skips the rows a Begin holds.
func TestPurgeSparesTakenOverRecords(t *testing.T) {
	clock := idemtest.NewClock()
	tb := setup(t, pgstore.Config{Now: clock.Now, PurgeBatch: 7})
	ctx := ctxT(t)
	r := mustRequest(t, `{}`)
	short := &idem.BeginOpts{Retention: time.Minute, Lease: time.Minute}
	for round := range 5 {
		ns := idemtest.RandomNamespace(t)
		const keys = 200
		for i := range keys {
			if _, err := tb.store.Begin(ctx, mustKey(t, ns, strconv.Itoa(i)), r, short); err != nil {
				t.Fatal(err)
			}
		}
		clock.Advance(2 * time.Minute)
		asOf := clock.Now()
		var wg sync.WaitGroup
		var reserved []idem.Key
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := round % 2; i < keys; i += 2 {
				k := mustKey(t, ns, strconv.Itoa(i))
				o, err := tb.store.Begin(ctx, k, r, nil)
				if err != nil {
					t.Error(err)
					return
				}
				if o.Kind == idem.Fresh {
					reserved = append(reserved, k)
				}
			}
		}()
		if _, err := tb.store.PurgeExpired(ctx, ns, asOf); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if len(reserved) != keys/2 {
			t.Fatalf("%d Begins of expired keys answered Fresh, want %d", len(reserved), keys/2)
		}
		for _, k := range reserved {
			if _, err := tb.store.Get(ctx, k); err != nil {
				t.Fatalf("round %d: Get of %s, reserved during the purge: %v", round, k.Value(), err)
			}
		}
	}
}
