package pgstore_test

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
	"github.com/idemgo/idem/internal/pgtest"
	"github.com/idemgo/idem/store/pgstore"
)

// countingConn counts the writes of a connection: one per round trip, as
// pgx sends each request's messages in one write.
type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

// TestOneRoundTrip: every uncontended Begin, whatever its outcome, and
// every settle call is one round trip to the server.
func TestOneRoundTrip(t *testing.T) {
	url := pgtest.URL(t)
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	var writes atomic.Int64
	dial := pc.ConnConfig.DialFunc
	pc.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countingConn{c, &writes}, nil
	}
	pc.MaxConns = 1 // one connection, so that its statement cache is warm
	pc.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	clock := idemtest.NewClock()
	s, err := pgstore.New(pool, pgstore.Config{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	ns := idemtest.RandomNamespace(t)
	a, b := mustRequest(t, `{"a":1}`), mustRequest(t, `{"b":2}`)

	// Warm the connection's statement cache with every statement once.
	warm := mustKey(t, ns, "warm")
	o, _ := s.Begin(ctx, warm, a, nil)
	_, _ = s.Heartbeat(ctx, warm, o.Lease, 0)
	_ = s.FailPermanent(ctx, warm, idem.Lease{Token: "x"}, idem.StoredError{})
	_ = s.FailTransient(ctx, warm, idem.Lease{Token: "x"})
	_ = s.Commit(ctx, warm, o.Lease, []byte(`1`))
	_, _ = s.Get(ctx, warm)
	_, _ = s.PurgeExpired(ctx, ns, clock.Now().Add(-time.Hour))

	k := mustKey(t, ns, "k")
	var lease idem.Lease
	steps := []struct {
		name string
		call func() idem.Kind
		want idem.Kind
	}{
		{"Begin fresh", func() idem.Kind { o, _ := s.Begin(ctx, k, a, nil); lease = o.Lease; return o.Kind }, idem.Fresh},
		{"Begin in flight", func() idem.Kind { o, _ := s.Begin(ctx, k, a, nil); return o.Kind }, idem.InFlight},
		{"Begin mismatch", func() idem.Kind { o, _ := s.Begin(ctx, k, b, nil); return o.Kind }, idem.Mismatch},
		{"Heartbeat", func() idem.Kind { _, err := s.Heartbeat(ctx, k, lease, 0); return kindOf(err) }, 0},
		{"Begin takeover", func() idem.Kind {
			clock.Advance(idem.DefaultLease)
			o, _ := s.Begin(ctx, k, a, nil)
			lease = o.Lease
			return o.Kind
		}, idem.Fresh},
		{"Commit", func() idem.Kind { return kindOf(s.Commit(ctx, k, lease, []byte(`{"r":1}`))) }, 0},
		{"Begin replay", func() idem.Kind { o, _ := s.Begin(ctx, k, a, nil); return o.Kind }, idem.PriorResult},
		{"Get", func() idem.Kind { _, err := s.Get(ctx, k); return kindOf(err) }, 0},
	}
	for _, st := range steps {
		before := writes.Load()
		got := st.call()
		if n := writes.Load() - before; n != 1 {
			t.Errorf("%s: %d round trips, want 1", st.name, n)
		}
		if got != st.want {
			t.Errorf("%s: outcome %v, want %v", st.name, got, st.want)
		}
	}
}

// kindOf maps a settle call's error to a Kind for the table above: 0 for
// success, an invalid Kind otherwise.
func kindOf(err error) idem.Kind {
	if err != nil {
		return 99
	}
	return 0
}

// TestConcurrentTakeover: of many Begins that find the same abandoned
// reservation at once, exactly one takes it over, with fence+1.
func TestConcurrentTakeover(t *testing.T) {
	clock := idemtest.NewClock()
	tb := setup(t, pgstore.Config{Now: clock.Now})
	ctx := ctxT(t)
	k := mustKey(t, idemtest.RandomNamespace(t), "abandoned")
	r := mustRequest(t, `{"a":1}`)
	for round := 1; round <= 5; round++ {
		clock.Advance(idem.DefaultLease)
		const n = 16
		outcomes := make([]idem.Outcome, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				outcomes[i], errs[i] = tb.store.Begin(ctx, k, r, nil)
			}()
		}
		close(start)
		wg.Wait()
		fresh := 0
		for i, o := range outcomes {
			if errs[i] != nil {
				t.Fatalf("round %d: Begin: %v", round, errs[i])
			}
			switch o.Kind {
			case idem.Fresh:
				fresh++
				if o.Lease.Fence != int64(round) {
					t.Errorf("round %d: fence %d, want %d", round, o.Lease.Fence, round)
				}
				if o.TakenOver != (round > 1) {
					t.Errorf("round %d: TakenOver = %v", round, o.TakenOver)
				}
			case idem.InFlight:
			default:
				t.Errorf("round %d: outcome %s", round, o.Kind)
			}
		}
		if fresh != 1 {
			t.Fatalf("round %d: %d Fresh outcomes, want exactly 1", round, fresh)
		}
	}
}

// TestPurgeBatches: PurgeExpired deletes all expired records of its
// namespace across several batches and leaves the rest.
func TestPurgeBatches(t *testing.T) {
	clock := idemtest.NewClock()
	tb := setup(t, pgstore.Config{Now: clock.Now, PurgeBatch: 3})
	ctx := ctxT(t)
	ns, other := idemtest.RandomNamespace(t), idemtest.RandomNamespace(t)
	r := mustRequest(t, `{}`)
	short := &idem.BeginOpts{Retention: time.Minute}
	for i := range 10 {
		for _, n := range []idem.Namespace{ns, other} {
			if _, err := tb.store.Begin(ctx, mustKey(t, n, "short-"+string(rune('a'+i))), r, short); err != nil {
				t.Fatal(err)
			}
		}
	}
	live := mustKey(t, ns, "long")
	if _, err := tb.store.Begin(ctx, live, r, nil); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	n, err := tb.store.PurgeExpired(ctx, ns, clock.Now())
	if err != nil || n != 10 {
		t.Fatalf("PurgeExpired = %d, %v; want 10", n, err)
	}
	if _, err := tb.store.Get(ctx, live); err != nil {
		t.Errorf("live record: %v", err)
	}
	var left int
	if err := tb.pool.QueryRow(ctx, `SELECT count(*) FROM `+pgstore.DefaultTable+` WHERE namespace = $1`, string(other)).Scan(&left); err != nil || left != 10 {
		t.Errorf("other namespace has %d records, %v; want 10 untouched", left, err)
	}
}
