package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
	"github.com/idemgo/idem/internal/redistest"
	"github.com/idemgo/idem/store/redisstore"
)

// calls runs every Store method once on key and returns their errors by
// name. lease is used by the settle calls.
func calls(ctx context.Context, s idem.Store, key idem.Key, lease idem.Lease) map[string]error {
	req, _ := idem.NewRequest([]byte(`{"a":1}`))
	_, beginErr := s.Begin(ctx, key, req, nil)
	_, heartbeatErr := s.Heartbeat(ctx, key, lease, 0)
	_, purgeErr := s.PurgeExpired(ctx, key.Namespace(), time.Now())
	_, getErr := s.Get(ctx, key)
	return map[string]error{
		"Begin":         beginErr,
		"Commit":        s.Commit(ctx, key, lease, []byte(`1`)),
		"FailPermanent": s.FailPermanent(ctx, key, lease, idem.StoredError{Class: "c"}),
		"FailTransient": s.FailTransient(ctx, key, lease),
		"Heartbeat":     heartbeatErr,
		"PurgeExpired":  purgeErr,
		"Get":           getErr,
	}
}

// TestServerDown stops the server under a store: every call fails with
// ErrUnavailable, with the network error still visible; after a restart
// the store works again with the record it had.
func TestServerDown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := redistest.Start(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: 1, DialTimeout: time.Second, DialerRetries: 1})
	t.Cleanup(func() { _ = client.Close() })
	s := newStore(t, client, "", time.Now)
	key := mustKey(t, idemtest.RandomNamespace(t), "down")
	o, err := s.Begin(ctx, key, mustRequest(t, `{"a":1}`), nil)
	if err != nil || o.Kind != idem.Fresh {
		t.Fatalf("Begin = %v %v", o.Kind, err)
	}

	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	for name, err := range calls(ctx, s, key, o.Lease) {
		var opErr *net.OpError
		if !errors.Is(err, idem.ErrUnavailable) || !errors.As(err, &opErr) {
			t.Errorf("%s with the server down: %v, want ErrUnavailable wrapping a *net.OpError", name, err)
		}
	}

	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	// The failed calls above dialled as often as the pool has connections
	// (10 per GOMAXPROCS) when GOMAXPROCS is 1, and go-redis then fails
	// fast until its probe, once a second, reaches the server again (see
	// the package documentation): repeat the Commit, which is safe with
	// the same lease and result, while the store is still unavailable.
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := s.Commit(ctx, key, o.Lease, []byte(`"after restart"`))
		if err == nil {
			break
		}
		if !errors.Is(err, idem.ErrUnavailable) || time.Now().After(deadline) {
			t.Fatalf("Commit after the restart: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if p, err := s.Begin(ctx, key, mustRequest(t, `{"a":1}`), nil); err != nil || p.Kind != idem.PriorResult || string(p.Result) != `"after restart"` {
		t.Fatalf("Begin after the Commit = %v %s %v, want the committed result", p.Kind, p.Result, err)
	}
}

func TestClosedClient(t *testing.T) {
	t.Parallel()
	client := sharedClient(t)
	s := newStore(t, client, redistest.Prefix(t), time.Now)
	_ = client.Close()
	key := mustKey(t, idemtest.RandomNamespace(t), "closed")
	lease := idem.Lease{Token: "t", Fence: 1}
	for name, err := range calls(context.Background(), s, key, lease) {
		if !errors.Is(err, idem.ErrUnavailable) || !errors.Is(err, redis.ErrClosed) {
			t.Errorf("%s on a closed client: %v, want ErrUnavailable wrapping redis.ErrClosed", name, err)
		}
	}
}

func TestContextDone(t *testing.T) {
	t.Parallel()
	s := newStore(t, sharedClient(t), redistest.Prefix(t), time.Now)
	key := mustKey(t, idemtest.RandomNamespace(t), "ctx")
	lease := idem.Lease{Token: "t", Fence: 1}
	for _, c := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want error
	}{
		{"cancelled", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, cancel
		}, context.Canceled},
		{"deadline passed", func() (context.Context, context.CancelFunc) {
			return context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
		}, context.DeadlineExceeded},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := c.ctx()
			defer cancel()
			for name, err := range calls(ctx, s, key, lease) {
				if !errors.Is(err, c.want) {
					t.Errorf("%s: %v, want %v", name, err, c.want)
				}
			}
		})
	}
}

// TestContextCancelledInFlight cancels calls while they wait on a server
// that does not answer: the error is the context's.
func TestContextCancelledInFlight(t *testing.T) {
	t.Parallel()
	// A listener that accepts connections and never answers.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { _ = ln.Close(); <-done })
	go func() {
		defer close(done)
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				_ = c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	client := redis.NewClient(&redis.Options{Addr: ln.Addr().String(), Protocol: 2, DisableIdentity: true, ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { _ = client.Close() })
	s := newStore(t, client, "", time.Now)
	key := mustKey(t, idemtest.RandomNamespace(t), "hang")
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = s.Begin(ctx, key, mustRequest(t, `{}`), nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Begin on a silent server past its deadline: %v, want context.DeadlineExceeded", err)
	}
}

// TestForeignKeys puts keys the store did not write under its prefix: a
// call on such a key fails with ErrUnavailable and changes nothing, and
// PurgeExpired leaves them alone.
func TestForeignKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client := sharedClient(t)
	prefix := redistest.Prefix(t)
	s := newStore(t, client, prefix, time.Now)
	ns := idemtest.RandomNamespace(t)
	key := mustKey(t, ns, "foreign")
	rkey := prefix + string(ns) + ":0::foreign"
	if err := client.Set(ctx, rkey, "not a record", 0).Err(); err != nil {
		t.Fatal(err)
	}
	other := prefix + string(ns) + ":0::other-hash"
	if err := client.HSet(ctx, other, "field", "value").Err(); err != nil {
		t.Fatal(err)
	}
	_, err := s.Begin(ctx, key, mustRequest(t, `{}`), nil)
	if !errors.Is(err, idem.ErrUnavailable) || !strings.Contains(err.Error(), "not a record") {
		t.Errorf("Begin on a string that is not a record: %v, want ErrUnavailable (not a record)", err)
	}
	_, err = s.Begin(ctx, mustKey(t, ns, "other-hash"), mustRequest(t, `{}`), nil)
	if !errors.Is(err, idem.ErrUnavailable) || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Errorf("Begin on a hash: %v, want ErrUnavailable (WRONGTYPE)", err)
	}
	n, err := s.PurgeExpired(ctx, ns, time.Now().Add(1000*time.Hour))
	if err != nil || n != 0 {
		t.Errorf("PurgeExpired = %d, %v; want 0 (foreign keys are not records)", n, err)
	}
	if v, err := client.Get(ctx, rkey).Result(); err != nil || v != "not a record" {
		t.Errorf("foreign string key = %q, %v; want it untouched", v, err)
	}
	if v, err := client.HGet(ctx, other, "field").Result(); err != nil || v != "value" {
		t.Errorf("foreign hash = %q, %v; want it untouched", v, err)
	}
}

// TestPayloadLimits checks that oversized values are rejected before
// anything reaches Redis: with the client closed, the answer is still the
// typed error, not ErrUnavailable.
func TestPayloadLimits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client := sharedClient(t)
	s, err := redisstore.New(client, redisstore.Config{MaxPayload: 64})
	if err != nil {
		t.Fatal(err)
	}
	_ = client.Close()
	key := mustKey(t, idemtest.RandomNamespace(t), "big")
	big := []byte(`"` + strings.Repeat("x", 64) + `"`)
	lease := idem.Lease{Token: "t", Fence: 1}
	req := mustRequest(t, `{}`)
	var tooLarge *idem.PayloadTooLargeError
	_, beginErr := s.Begin(ctx, key, idem.Request{Fingerprint: req.Fingerprint, Payload: big}, nil)
	for name, c := range map[string]struct {
		err  error
		what string
	}{
		"Begin":         {beginErr, "request"},
		"Commit":        {s.Commit(ctx, key, lease, big), "result"},
		"FailPermanent": {s.FailPermanent(ctx, key, lease, idem.StoredError{Class: "c", Message: string(big)}), "error"},
	} {
		if !errors.As(c.err, &tooLarge) || tooLarge.What != c.what || errors.Is(c.err, idem.ErrUnavailable) {
			t.Errorf("%s over the limit: %v, want *PayloadTooLargeError for the %s", name, c.err, c.what)
		}
	}
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = client.Close() })
	for _, c := range []struct {
		name  string
		cfg   redisstore.Config
		field string
	}{
		{"negative retention", redisstore.Config{Retention: -1}, "Config.Retention"},
		{"negative lease", redisstore.Config{Lease: -1}, "Config.Lease"},
		{"negative max payload", redisstore.Config{MaxPayload: -1}, "Config.MaxPayload"},
		{"max payload past Redis's strings", redisstore.Config{MaxPayload: redisstore.MaxMaxPayload + 1}, "Config.MaxPayload"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := redisstore.New(client, c.cfg); err == nil || !strings.Contains(err.Error(), c.field) {
				t.Errorf("New: %v, want an error naming %s", err, c.field)
			}
		})
	}
	if _, err := redisstore.New(nil, redisstore.Config{}); err == nil {
		t.Error("New with a nil client succeeded")
	}
	if _, err := redisstore.New(client, redisstore.Config{}); err != nil {
		t.Errorf("New with the zero Config: %v", err)
	}
	if _, err := redisstore.New(client, redisstore.Config{MaxPayload: redisstore.MaxMaxPayload}); err != nil {
		t.Errorf("New with MaxPayload at MaxMaxPayload: %v", err)
	}
}

// TestNewNilClient: New refuses a nil client with an error, whether the
// interface is nil or holds a nil pointer of a go-redis client type, which
// would otherwise panic in New (AutoPipeline) or in the store's first call.
func TestNewNilClient(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		client redis.UniversalClient
	}{
		{"nil", nil},
		{"nil *redis.Client", (*redis.Client)(nil)},
		{"nil *redis.ClusterClient", (*redis.ClusterClient)(nil)},
		{"nil *redis.Ring", (*redis.Ring)(nil)},
	} {
		for _, auto := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/AutoPipeline=%v", c.name, auto), func(t *testing.T) {
				var s *redisstore.Store
				var err error
				func() {
					defer func() {
						if r := recover(); r != nil {
							err = fmt.Errorf("New panicked: %v", r)
						}
					}()
					s, err = redisstore.New(c.client, redisstore.Config{AutoPipeline: auto})
				}()
				if err == nil || s != nil || !strings.Contains(err.Error(), "client is nil") {
					t.Errorf("New = %v, %v; want nil and an error saying the client is nil", s, err)
				}
			})
		}
	}
}

// TestAutoPipelineContextEnds pauses a private server (CLIENT PAUSE)
// under an auto-pipelined store: a call whose context ends while its
// command waits in a batch returns then, with the context's error, not
// when the batch is done (with go-redis's default options, not before the
// server answers again, however long that takes).
func TestAutoPipelineContextEnds(t *testing.T) {
	t.Parallel()
	_, admin, s := privateAutoPipelined(t, redisstore.Config{AutoPipeline: true})
	ctx := context.Background()
	key := mustKey(t, idemtest.RandomNamespace(t), "paused")
	req := mustRequest(t, `{}`)
	o, err := s.Begin(ctx, key, req, nil) // connects, and loads the script
	if err != nil || o.Kind != idem.Fresh {
		t.Fatalf("Begin = %v, %v", o.Kind, err)
	}
	// The server answers nobody for 5s (the pause cannot be lifted early:
	// CLIENT UNPAUSE waits too).
	if err := admin.Do(ctx, "CLIENT", "PAUSE", "5000", "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	calls := map[string]func(context.Context) error{
		"Begin": func(ctx context.Context) error {
			_, err := s.Begin(ctx, mustKey(t, key.Namespace(), "other"), req, nil)
			return err
		},
		"Commit": func(ctx context.Context) error { return s.Commit(ctx, key, o.Lease, []byte(`1`)) },
		"Get": func(ctx context.Context) error {
			_, err := s.Get(ctx, key)
			return err
		},
	}
	var wg sync.WaitGroup
	for name, call := range calls {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			defer cancel()
			start := time.Now()
			err := call(cctx)
			if took := time.Since(start); took > 2*time.Second { // well before the pause ends
				t.Errorf("%s returned %v after its context ended", name, took-100*time.Millisecond)
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s on a paused server: %v, want context.DeadlineExceeded", name, err)
			}
		})
	}
	wg.Wait()
}

// A Begin whose caller left (its context ended while its command waited
// in an auto-pipelined batch) may still reserve the key when the server
// answers; the store then releases that reservation, which nobody holds,
// so that the key is free again at once rather than InFlight until the
// lease lapses.
func TestAutoPipelineReleasesABeginNobodyHeard(t *testing.T) {
	t.Parallel()
	_, admin, s := privateAutoPipelined(t, redisstore.Config{AutoPipeline: true, Lease: time.Hour})
	key, req := leaveABeginOnAPausedServer(t, s, admin)
	waitFresh(t, s, key, req, "the unheard one")
}

// leaveABeginOnAPausedServer pauses the server of s for 500 ms (with
// admin, a client of its own) and makes a Begin whose caller leaves after
// 50 ms, its command left in flight; it returns the Begin's key and
// request. A Begin before the pause connects and loads the script.
func leaveABeginOnAPausedServer(t *testing.T, s *redisstore.Store, admin *redis.Client) (idem.Key, idem.Request) {
	t.Helper()
	ctx := context.Background()
	ns := idemtest.RandomNamespace(t)
	req := mustRequest(t, `{}`)
	if _, err := s.Begin(ctx, mustKey(t, ns, "warm"), req, nil); err != nil {
		t.Fatal(err)
	}
	if err := admin.Do(ctx, "CLIENT", "PAUSE", "500", "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	key := mustKey(t, ns, "left")
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err := s.Begin(cctx, key, req, nil)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Begin on a paused server: %v, want context.DeadlineExceeded", err)
	}
	return key, req
}

// waitFresh waits up to 5 s for a Begin of key to answer Fresh: for the
// reservation a Begin whose caller left (after) made, and nobody holds, to
// be released.
func waitFresh(t *testing.T, s *redisstore.Store, key idem.Key, req idem.Request, after string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		o, err := s.Begin(context.Background(), key, req, nil)
		if err != nil {
			t.Fatal(err)
		}
		if o.Kind == idem.Fresh {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Begin after %s = %v 5 s on, want Fresh: the reservation nobody holds still holds the key", after, o.Kind)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// privateAutoPipelined starts a Redis server of the test's own (which the
// test may pause) and returns it, a client of it for the test's own
// commands, and a store on it made with cfg and AutoPipeline, on a client
// with go-redis's default timeouts and retries.
func privateAutoPipelined(t *testing.T, cfg redisstore.Config) (*redistest.Server, *redis.Client, *redisstore.Store) {
	t.Helper()
	srv := redistest.Start(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = client.Close() })
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = admin.Close() })
	cfg.AutoPipeline = true
	s, err := redisstore.New(client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return srv, admin, s
}
