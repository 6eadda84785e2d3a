package consumer_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
	_ "modernc.org/sqlite"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/consumer"
	"github.com/idemgo/idem/internal/pgtest"
	"github.com/idemgo/idem/internal/redistest"
	"github.com/idemgo/idem/store/memstore"
	"github.com/idemgo/idem/store/pgstore"
	"github.com/idemgo/idem/store/redisstore"
	"github.com/idemgo/idem/store/sqlitestore"
	"github.com/idemgo/idem/tracker"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(redistest.Wrap(pgtest.Wrap(m))) }

type msg struct {
	ID   string
	Fail bool
}

// ledgers are the ledgers every behaviour is checked against: a
// TrackerLedger, and a StoreLedger on each store of stores.
func ledgers(t *testing.T) map[string]func() consumer.Ledger {
	m := map[string]func() consumer.Ledger{
		"tracker": func() consumer.Ledger {
			tr := tracker.New(tracker.Config{})
			tr.Start()
			t.Cleanup(tr.Stop)
			return consumer.TrackerLedger(tr, "orders")
		},
	}
	for name, newStore := range stores(t) {
		m[name] = func() consumer.Ledger {
			return consumer.StoreLedger(newStore(), idem.MustNamespace("orders"), nil)
		}
	}
	return m
}

// stores are the stores a StoreLedger is checked on: memory ("store"),
// PostgreSQL, Redis and SQLite, each a fresh one per call.
func stores(t *testing.T) map[string]func() idem.Store {
	return map[string]func() idem.Store{
		"store": func() idem.Store {
			s, err := memstore.New(memstore.Config{})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		"postgres": func() idem.Store {
			ctx := context.Background()
			pool, err := pgxpool.New(ctx, pgtest.URL(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			s, err := pgstore.New(pool, pgstore.Config{})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			return s
		},
		"redis": func() idem.Store {
			opts, err := redis.ParseURL(redistest.URL(t))
			if err != nil {
				t.Fatal(err)
			}
			client := redis.NewClient(opts)
			t.Cleanup(func() { client.Close() })
			s, err := redisstore.New(client, redisstore.Config{Prefix: redistest.Prefix(t)})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		"sqlite": func() idem.Store {
			db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "consumer.db")+
				"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_txlock=immediate")
			if err != nil {
				t.Fatal(err)
			}
			db.SetMaxOpenConns(1)
			t.Cleanup(func() { db.Close() })
			s, err := sqlitestore.New(db, sqlitestore.Config{})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Migrate(context.Background()); err != nil {
				t.Fatal(err)
			}
			return s
		},
	}
}

type bundle struct {
	c    *consumer.Consumer[msg]
	runs atomic.Int32
	// hold, when set, blocks the handler until closed; started receives
	// once per run.
	hold    chan struct{}
	started chan struct{}
}

func setup(t *testing.T, l consumer.Ledger) *bundle {
	b := &bundle{}
	c, err := consumer.New(consumer.Config[msg]{
		Ledger: l,
		Key:    func(m msg) (string, error) { return m.ID, nil },
		Handle: func(ctx context.Context, m msg) error {
			b.runs.Add(1)
			if b.started != nil {
				b.started <- struct{}{}
			}
			if b.hold != nil {
				<-b.hold
			}
			if m.Fail {
				return errors.New("handler failed")
			}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	b.c = c
	return b
}

func handle(t *testing.T, b *bundle, m msg) consumer.Outcome {
	t.Helper()
	o, _ := b.c.Handle(context.Background(), m)
	return o
}

// T6: success → the redelivery is acknowledged without running.
func TestT6SuccessThenDuplicate(t *testing.T) {
	for name, newLedger := range ledgers(t) {
		t.Run(name, func(t *testing.T) {
			b := setup(t, newLedger())
			if o := handle(t, b, msg{ID: "m1"}); o != consumer.Handled || !o.Ack() {
				t.Fatalf("first delivery: %s", o)
			}
			for range 3 {
				if o := handle(t, b, msg{ID: "m1"}); o != consumer.Duplicate || !o.Ack() {
					t.Fatalf("redelivery: %s", o)
				}
			}
			if n := b.runs.Load(); n != 1 {
				t.Fatalf("handler ran %d times", n)
			}
		})
	}
}

// T6: handler error → the key is released, the redelivery runs again.
func TestT6FailureReleases(t *testing.T) {
	for name, newLedger := range ledgers(t) {
		t.Run(name, func(t *testing.T) {
			b := setup(t, newLedger())
			o, err := b.c.Handle(context.Background(), msg{ID: "m2", Fail: true})
			if o != consumer.Failed || o.Ack() || err == nil {
				t.Fatalf("failing delivery: %s, %v", o, err)
			}
			if o := handle(t, b, msg{ID: "m2"}); o != consumer.Handled {
				t.Fatalf("redelivery after a failure: %s", o)
			}
			if n := b.runs.Load(); n != 2 {
				t.Fatalf("handler ran %d times, want 2", n)
			}
		})
	}
}

// T6: a concurrent duplicate is reported in progress (not acknowledged),
// never dropped; if the first delivery then fails, the duplicate's
// redelivery runs.
func TestT6ConcurrentDuplicateNotAcked(t *testing.T) {
	for name, newLedger := range ledgers(t) {
		t.Run(name, func(t *testing.T) {
			b := setup(t, newLedger())
			b.hold = make(chan struct{})
			b.started = make(chan struct{}, 2)
			first := make(chan consumer.Outcome)
			go func() { first <- handle(t, b, msg{ID: "m3", Fail: true}) }()
			<-b.started
			o, err := b.c.Handle(context.Background(), msg{ID: "m3"})
			if o != consumer.InProgress || o.Ack() || !errors.Is(err, consumer.ErrInProgress) {
				t.Fatalf("concurrent duplicate: %s, %v", o, err)
			}
			close(b.hold)
			if o := <-first; o != consumer.Failed {
				t.Fatalf("first delivery: %s", o)
			}
			if o := handle(t, b, msg{ID: "m3"}); o != consumer.Handled {
				t.Fatalf("redelivery of the duplicate: %s", o)
			}
		})
	}
}

func TestManyDeliveriesRunOnce(t *testing.T) {
	for name, newLedger := range ledgers(t) {
		t.Run(name, func(t *testing.T) {
			b := setup(t, newLedger())
			var wg sync.WaitGroup
			for range 32 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for { // a broker redelivering until acknowledged
						if o := handle(t, b, msg{ID: "m4"}); o.Ack() {
							return
						}
					}
				}()
			}
			wg.Wait()
			if n := b.runs.Load(); n != 1 {
				t.Fatalf("handler ran %d times for 32 deliveries", n)
			}
		})
	}
}

func TestPanicReleases(t *testing.T) {
	for name, newLedger := range ledgers(t) {
		t.Run(name, func(t *testing.T) {
			l := newLedger()
			var runs int
			c, _ := consumer.New(consumer.Config[msg]{
				Ledger: l,
				Key:    func(m msg) (string, error) { return m.ID, nil },
				Handle: func(context.Context, msg) error {
					runs++
					if runs == 1 {
						panic("boom")
					}
					return nil
				},
			})
			func() {
				defer func() {
					if recover() != "boom" {
						t.Fatal("panic not re-raised")
					}
				}()
				_, _ = c.Handle(context.Background(), msg{ID: "m5"})
			}()
			if o, err := c.Handle(context.Background(), msg{ID: "m5"}); o != consumer.Handled {
				t.Fatalf("after a panic: %s %v", o, err)
			}
		})
	}
}

func TestBadKeysAndConfig(t *testing.T) {
	s, _ := memstore.New(memstore.Config{})
	l := consumer.StoreLedger(s, idem.MustNamespace("orders"), nil)
	c, _ := consumer.New(consumer.Config[msg]{Ledger: l, Key: func(m msg) (string, error) { return m.ID, nil }, Handle: func(context.Context, msg) error { return nil }})
	if o, err := c.Handle(context.Background(), msg{ID: ""}); o != consumer.Failed || !errors.Is(err, idem.ErrInvalidKey) {
		t.Errorf("empty key: %s %v", o, err)
	}
	keyErr := errors.New("no id")
	c2, _ := consumer.New(consumer.Config[msg]{Ledger: l, Key: func(msg) (string, error) { return "", keyErr }, Handle: func(context.Context, msg) error { return nil }})
	if o, err := c2.Handle(context.Background(), msg{}); o != consumer.Failed || !errors.Is(err, keyErr) {
		t.Errorf("key function error: %s %v", o, err)
	}
	if _, err := consumer.New(consumer.Config[msg]{}); err == nil {
		t.Error("empty config accepted")
	}
	for o, want := range map[consumer.Outcome]string{consumer.Handled: "handled", consumer.Duplicate: "duplicate", consumer.InProgress: "in_progress", consumer.Failed: "failed", 9: "Outcome(9)"} {
		if o.String() != want {
			t.Errorf("%d.String() = %q", int(o), o.String())
		}
	}
}

// A tracker that is not started fails open: every delivery runs.
func TestTrackerNotStartedFailsOpen(t *testing.T) {
	b := setup(t, consumer.TrackerLedger(tracker.New(tracker.Config{}), "orders"))
	for range 2 {
		if o := handle(t, b, msg{ID: "m6"}); o != consumer.Handled {
			t.Fatalf("outcome %s", o)
		}
	}
	if n := b.runs.Load(); n != 2 {
		t.Fatalf("runs %d, want 2 (fail-open)", n)
	}
}

// A handler that leaves by runtime.Goexit (t.FailNow does) neither returns
// nor panics; its key is released all the same, not held until a lease or
// TTL runs out (or, kept alive, for ever).
func TestGoexitReleases(t *testing.T) {
	for name, newLedger := range ledgers(t) {
		t.Run(name, func(t *testing.T) {
			l := newLedger()
			var runs atomic.Int32
			c, _ := consumer.New(consumer.Config[msg]{
				Ledger: l,
				Key:    func(m msg) (string, error) { return m.ID, nil },
				Handle: func(context.Context, msg) error {
					if runs.Add(1) == 1 {
						runtime.Goexit()
					}
					return nil
				},
			})
			exited := make(chan struct{})
			go func() {
				defer close(exited)
				_, _ = c.Handle(context.Background(), msg{ID: "goexit"})
			}()
			<-exited
			if o, err := c.Handle(context.Background(), msg{ID: "goexit"}); o != consumer.Handled || runs.Load() != 2 {
				t.Fatalf("redelivery after the handler exited: %s %v, %d runs", o, err, runs.Load())
			}
		})
	}
}

// TestTrackerLedgerLostClaimIsReported checks that a TrackerLedger delivery
// whose claim outlived the tracker's TTL and was taken over by a redelivery
// says so: Complete and Release then change nothing (the key stays the
// redelivery's), and Handle's error wraps idem.ErrStaleToken, as StoreLedger
// reports a lost lease, rather than Handled with a nil error for a key that
// is not marked done. A claim that lapsed with nobody taking the key over
// still settles without an error.
func TestTrackerLedgerLostClaimIsReported(t *testing.T) {
	const ttl = time.Minute
	for _, tc := range []struct {
		name     string
		fail     bool // the first delivery's handler fails
		takeover bool // a redelivery claims the key after the TTL
		want     consumer.Outcome
		stale    bool // the first delivery's error wraps idem.ErrStaleToken
	}{
		{"complete after takeover", false, true, consumer.Handled, true},
		{"release after takeover", true, true, consumer.Failed, true},
		{"complete after lapse", false, false, consumer.Handled, false},
		{"release after lapse", true, false, consumer.Failed, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tr := tracker.New(tracker.Config{TTL: ttl})
				tr.Start()
				defer tr.Stop()
				b := setup(t, consumer.TrackerLedger(tr, "orders"))
				b.hold = make(chan struct{})
				b.started = make(chan struct{}, 2)

				first := make(chan error, 1)
				go func() {
					o, err := b.c.Handle(context.Background(), msg{ID: "m", Fail: tc.fail})
					if o != tc.want {
						t.Errorf("first delivery: %s, want %s", o, tc.want)
					}
					first <- err
				}()
				<-b.started
				time.Sleep(ttl + time.Second) // the first claim lapses
				second := make(chan consumer.Outcome, 1)
				if tc.takeover {
					go func() { second <- handle(t, b, msg{ID: "m"}) }()
					<-b.started
				}
				close(b.hold) // both handlers return
				err := <-first
				if got := errors.Is(err, idem.ErrStaleToken); got != tc.stale {
					t.Errorf("first delivery's error %v: wraps ErrStaleToken = %v, want %v", err, got, tc.stale)
				}
				if tc.fail && err == nil {
					t.Error("failing first delivery returned no error")
				}
				if !tc.takeover {
					if got := tr.Completed("orders", "m"); got == tc.fail {
						t.Errorf("after the lapsed claim settled: Completed = %v, want %v", got, !tc.fail)
					}
					return
				}
				if o := <-second; o != consumer.Handled {
					t.Fatalf("redelivery that took the key over: %s", o)
				}
				if !tr.Completed("orders", "m") {
					t.Error("the redelivery's completion was undone")
				}
				if n := b.runs.Load(); n != 2 {
					t.Errorf("handler ran %d times, want 2", n)
				}
			})
		})
	}
}

// TestPermanentErrorIsNotRecorded: Handle records no failure, not even one
// marked with idem.Permanent (which idem.Do records): the key is released
// and the redelivery runs the handler again, so that a message that can
// never succeed is redelivered for as long as the broker redelivers it.
func TestPermanentErrorIsNotRecorded(t *testing.T) {
	for name, newLedger := range ledgers(t) {
		t.Run(name, func(t *testing.T) {
			var runs atomic.Int32
			declined := errors.New("declined")
			c, err := consumer.New(consumer.Config[msg]{
				Ledger: newLedger(),
				Key:    func(m msg) (string, error) { return m.ID, nil },
				Handle: func(context.Context, msg) error {
					runs.Add(1)
					return idem.Permanent("declined", declined)
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 2 {
				o, err := c.Handle(context.Background(), msg{ID: "poison"})
				if o != consumer.Failed || o.Ack() || !errors.Is(err, declined) {
					t.Fatalf("delivery %d: %s, %v; want Failed with the handler's error", i+1, o, err)
				}
			}
			if n := runs.Load(); n != 2 {
				t.Fatalf("handler ran %d times for 2 deliveries, want 2", n)
			}
		})
	}
}
