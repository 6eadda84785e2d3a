package redisstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
	"github.com/idemgo/idem/store/redisstore"
)

// TestDrainBeforeClose: a Begin whose caller left while its command waited
// in an auto-pipelined batch reserves the key when the server answers;
// closing the client then flushes the batch but fails the release, which
// goes through the closed auto-pipeliner, and the key answered InFlight,
// held by nobody, until its lease lapsed. Drain, called before closing the
// client, waits for that answer and its release: after the close the key
// is free.
func TestDrainBeforeClose(t *testing.T) {
	t.Parallel()
	srv, admin, _ := privateAutoPipelined(t, redisstore.Config{})
	client := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = client.Close() })
	s, err := redisstore.New(client, redisstore.Config{AutoPipeline: true, Lease: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	key, req := leaveABeginOnAPausedServer(t, s, admin)
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := s.Drain(dctx); err != nil {
		t.Fatalf("Drain: %v", err)
	}
	if err := client.Close(); err != nil {
		t.Fatal(err)
	}
	other, err := redisstore.New(admin, redisstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if o, err := other.Begin(ctx, key, req, nil); err != nil || o.Kind != idem.Fresh {
		t.Errorf("Begin after Drain and Close = %v, %v; want Fresh: the reservation of the Begin whose caller left still holds the key", o.Kind, err)
	}
}

// TestDrainEndsWithItsContext: while the server does not answer, Drain
// returns when its context ends, with the context's error; with nothing
// left behind it returns nil at once.
func TestDrainEndsWithItsContext(t *testing.T) {
	t.Parallel()
	_, admin, s := privateAutoPipelined(t, redisstore.Config{Lease: time.Hour})
	ctx := context.Background()
	if err := s.Drain(ctx); err != nil {
		t.Fatalf("Drain with nothing left behind: %v", err)
	}
	ns := idemtest.RandomNamespace(t)
	req := mustRequest(t, `{}`)
	if _, err := s.Begin(ctx, mustKey(t, ns, "warm"), req, nil); err != nil {
		t.Fatal(err)
	}
	if err := admin.Do(ctx, "CLIENT", "PAUSE", "3000", "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err := s.Begin(cctx, mustKey(t, ns, "left"), req, nil)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Begin on a paused server: %v, want context.DeadlineExceeded", err)
	}
	dctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = s.Drain(dctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Drain on a paused server: %v, want context.DeadlineExceeded", err)
	}
	if took := time.Since(start); took > 2*time.Second { // well before the pause ends
		t.Errorf("Drain returned %v after it began, want at its context's end", took)
	}
	if err := s.Drain(context.Background()); err != nil { // the pause ends
		t.Errorf("Drain once the server answers: %v", err)
	}
}
