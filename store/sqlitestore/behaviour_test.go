package sqlitestore_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
)

// TestPurgeExpiredBatches: more expired records than one batch are all
// deleted, live ones and other namespaces' are kept.
func TestPurgeExpiredBatches(t *testing.T) {
	t.Parallel()
	db, _ := newDB(t, 2)
	clock := idemtest.NewClock()
	s := newStore(t, db, clock.Now)
	ctx := context.Background()
	ns, other := idemtest.RandomNamespace(t), idemtest.RandomNamespace(t)
	r := mustRequest(t, `{}`)
	short := &idem.BeginOpts{Retention: time.Minute}

	// The bulk of expired records is written in one statement; Begin
	// writes the rest.
	const expired = 2500 // two full batches and a partial one
	bulk := `WITH RECURSIVE i(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM i WHERE n < ?2)
INSERT INTO idempotency_record (namespace, key_value, request_hash, request_payload, status,
	owner_token, fence, created_at, expires_at, lease_expires_at)
SELECT ?1, 'bulk' || n, ?3, '{}', 'in_progress', 't', 1, ?4, ?5, ?5 FROM i`
	now := clock.Now()
	if _, err := db.ExecContext(ctx, bulk, string(ns), expired-1, r.Fingerprint.Bytes(), now.UnixMicro(), now.Add(time.Minute).UnixMicro()); err != nil {
		t.Fatal(err)
	}
	begin := func(k idem.Key, opts *idem.BeginOpts) {
		if o, err := s.Begin(ctx, k, r, opts); err != nil || o.Kind != idem.Fresh {
			t.Fatalf("Begin(%s) = %s, %v", k, o.Kind, err)
		}
	}
	begin(mustKey(t, ns, "expired"), short)
	for i := range 20 {
		begin(mustKey(t, ns, "live"+strconv.Itoa(i)), nil)
		begin(mustKey(t, other, "e"+strconv.Itoa(i)), short)
	}

	clock.Advance(time.Minute)
	n, err := s.PurgeExpired(ctx, ns, clock.Now())
	if err != nil || n != expired {
		t.Fatalf("PurgeExpired = %d, %v; want %d", n, err, expired)
	}
	count := func(ns idem.Namespace) (n int) {
		if err := db.QueryRow(`SELECT count(*) FROM idempotency_record WHERE namespace = ?`, string(ns)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if got := count(ns); got != 20 {
		t.Errorf("%d records left in the namespace, want the 20 live ones", got)
	}
	if got := count(other); got != 20 {
		t.Errorf("%d records left in the other namespace, want all 20", got)
	}
	if n, err := s.PurgeExpired(ctx, ns, clock.Now()); err != nil || n != 0 {
		t.Errorf("second PurgeExpired = %d, %v; want 0", n, err)
	}
}

// TestPayloadsStoredAsText: payloads are TEXT, and come back byte for byte,
// whitespace, escapes and all.
func TestPayloadsStoredAsText(t *testing.T) {
	t.Parallel()
	db, _ := newDB(t, 2)
	s := newStore(t, db, nil)
	ctx := context.Background()
	k := mustKey(t, idemtest.RandomNamespace(t), "k")
	req := []byte("{ \"b\" : [1,2] ,\n\t\"a\":\"\\u00e9\\/\" }")
	r := mustRequest(t, string(req))
	result := []byte(" {\"z\":1e3,  \"a\":\"caf\u00e9 \\ud83d\\ude00\"}\n")
	o := mustBegin(t, s, k, r, idem.Fresh)
	if err := s.Commit(ctx, k, o.Lease, result); err != nil {
		t.Fatal(err)
	}
	rec, err := s.Get(ctx, k)
	if err != nil || string(rec.Request) != string(req) || string(rec.Result) != string(result) {
		t.Fatalf("Get = %q / %q, %v; want %q / %q", rec.Request, rec.Result, err, req, result)
	}
	var reqType, resType string
	err = db.QueryRow(`SELECT typeof(request_payload), typeof(result_payload) FROM idempotency_record WHERE namespace = ?`,
		string(k.Namespace())).Scan(&reqType, &resType)
	if err != nil || reqType != "text" || resType != "text" {
		t.Errorf("column types %s, %s, %v; want text, text", reqType, resType, err)
	}
}

// TestConcurrentTakeover: of many Begins racing for an expired lease,
// exactly one takes the record over.
func TestConcurrentTakeover(t *testing.T) {
	t.Parallel()
	for _, conns := range []int{1, 4} {
		t.Run(strconv.Itoa(conns)+"Connections", func(t *testing.T) {
			t.Parallel()
			db, _ := newDB(t, conns)
			clock := idemtest.NewClock()
			s := newStore(t, db, clock.Now)
			k := mustKey(t, idemtest.RandomNamespace(t), "k")
			r := mustRequest(t, `{"a":1}`)
			old := mustBegin(t, s, k, r, idem.Fresh).Lease
			clock.Advance(idemtest.Lease)

			const n = 32
			var wg sync.WaitGroup
			outcomes, errs := make([]idem.Outcome, n), make([]error, n)
			start := make(chan struct{})
			for i := range n {
				wg.Go(func() {
					<-start
					outcomes[i], errs[i] = s.Begin(context.Background(), k, r, nil)
				})
			}
			close(start)
			wg.Wait()
			var winner idem.Outcome
			counts := map[idem.Kind]int{}
			for i := range n {
				if errs[i] != nil {
					t.Fatalf("Begin %d: %v", i, errs[i])
				}
				counts[outcomes[i].Kind]++
				if outcomes[i].Kind == idem.Fresh {
					winner = outcomes[i]
				}
			}
			if counts[idem.Fresh] != 1 || counts[idem.InFlight] != n-1 {
				t.Fatalf("outcomes = %v, want one fresh and %d in flight", counts, n-1)
			}
			if !winner.TakenOver || winner.Lease.Fence != old.Fence+1 {
				t.Errorf("winner = %+v, want a takeover with fence %d", winner, old.Fence+1)
			}
		})
	}
}

// TestConcurrentLoad: mixed Begin, Commit and replay traffic from many
// goroutines on a pool of connections, with the recommended settings,
// never surfaces SQLITE_BUSY (or any other error).
func TestConcurrentLoad(t *testing.T) {
	t.Parallel()
	db, _ := newDB(t, 4)
	s := newStore(t, db, nil)
	ns := idemtest.RandomNamespace(t)
	r := mustRequest(t, `{"a":1}`)
	const workers, keys = 8, 20
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			ctx := context.Background()
			for i := range keys {
				k := mustKey(t, ns, strconv.Itoa((i+w)%keys))
				o, err := s.Begin(ctx, k, r, nil)
				if err == nil && o.Kind == idem.Fresh {
					err = s.Commit(ctx, k, o.Lease, []byte(`"done"`))
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i := range keys {
		mustBegin(t, s, mustKey(t, ns, strconv.Itoa(i)), r, idem.PriorResult)
	}
}

// TestPurgeAsOfBeyondMicroseconds: an asOf too far from 1970 for Unix
// microseconds in an int64 (time.Unix(1<<62, 0), a "purge everything")
// selects what its order says, every record after all of them and none
// before, instead of wrapping around to another time.
func TestPurgeAsOfBeyondMicroseconds(t *testing.T) {
	t.Parallel()
	db, _ := newDB(t, 2)
	s := newStore(t, db, nil)
	ctx := context.Background()
	ns := idemtest.RandomNamespace(t)
	r := mustRequest(t, `{}`)
	for i := range 3 {
		mustBegin(t, s, mustKey(t, ns, "k"+strconv.Itoa(i)), r, idem.Fresh)
	}
	if n, err := s.PurgeExpired(ctx, ns, time.Unix(-1<<62, 0)); err != nil || n != 0 {
		t.Errorf("PurgeExpired(far past) = %d, %v; want 0", n, err)
	}
	if n, err := s.PurgeExpired(ctx, ns, time.Unix(1<<62, 0)); err != nil || n != 3 {
		t.Errorf("PurgeExpired(far future) = %d, %v; want all 3", n, err)
	}
}
