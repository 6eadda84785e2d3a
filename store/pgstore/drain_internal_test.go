package pgstore

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem"
)

// leaveABeginInABatch makes a Begin of key go out in a batch of s's only
// lane, behind a statement that keeps the server busy for hold, and
// returns once the Begin's caller has left (its context cancelled) while
// that batch runs. The returned func waits for the other calls the test
// made, which the batch answers.
func leaveABeginInABatch(t *testing.T, s *Store, p *pipeline, pool *pgxpool.Pool, key idem.Key, req idem.Request, hold time.Duration) (wait func()) {
	t.Helper()
	ctx := context.Background()
	busy := keepBusy(t, p, 300*time.Millisecond)
	slow := make(chan error, 1)
	go func() {
		_, err := p.exec(ctx, "SELECT pg_sleep($1::float8), 'ahead of the Begin'", hold.Seconds())
		slow <- err
	}()
	waitFor(t, p, func() bool { return len(p.queue) == 1 })
	bctx, cancel := context.WithCancel(ctx)
	defer cancel()
	begun := make(chan error, 1)
	go func() {
		o, err := s.Begin(bctx, key, req, nil)
		if err == nil {
			err = fmt.Errorf("Begin answered %s", o.Kind)
		}
		begun <- err
	}()
	waitFor(t, p, func() bool { return len(p.queue) == 2 })
	// Until the batch is on the server: the slow statement runs, the
	// Begin after it.
	waitActive(t, pool, `query LIKE '%ahead of the Begin%' AND state = 'active'`, "the batch did not start")
	cancel()
	if err := <-begun; !errors.Is(err, context.Canceled) {
		t.Fatalf("Begin = %v, want context.Canceled", err)
	}
	return func() {
		t.Helper()
		for _, c := range []<-chan error{busy, slow} {
			if err := <-c; err != nil {
				t.Error(err)
			}
		}
	}
}

// TestDrainBeforeClose: a Begin whose caller left while its statement
// waited in a batch reserves the key when the server gets to it; the
// store releases that reservation once the answer comes, in a goroutine
// of its own. A program that closed the pool right after its last call
// cut that release off, and the key answered InFlight, held by nobody,
// until its lease lapsed. Drain, called before closing the pool, waits
// for the answer and the release: after the close the key is free.
func TestDrainBeforeClose(t *testing.T) {
	ctx := context.Background()
	s, p, pool, key, req := oneLaneStore(t, Config{Lease: time.Hour}, "drain")
	url := pool.Config().ConnString()
	wait := leaveABeginInABatch(t, s, p, pool, key, req, time.Second)
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := s.Drain(dctx); err != nil {
		t.Fatalf("Drain: %v", err)
	}
	pool.Close()
	wait()

	other, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	s2, err := New(other, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if o, err := s2.Begin(ctx, key, req, nil); err != nil || o.Kind != idem.Fresh || o.TakenOver {
		t.Errorf("Begin after Drain and Close = %v (taken over: %v), %v; want Fresh: the reservation of the Begin whose caller left still holds the key", o.Kind, o.TakenOver, err)
	}
}

// TestDrainEndsWithItsContext: while a batch holding a statement of a
// caller that left is still on the server, Drain returns when its context
// ends, with the context's error, and once the answer has come and the
// reservation is released, with nil; with nothing left behind (or on a
// Store without a pool) it returns nil at once.
func TestDrainEndsWithItsContext(t *testing.T) {
	ctx := context.Background()
	var zero Store
	if err := zero.Drain(ctx); err != nil {
		t.Fatalf("Drain of the zero Store: %v", err)
	}
	s, p, pool, key, req := oneLaneStore(t, Config{Lease: time.Hour}, "drain-ctx")
	if err := s.Drain(ctx); err != nil {
		t.Fatalf("Drain with nothing left behind: %v", err)
	}
	wait := leaveABeginInABatch(t, s, p, pool, key, req, 3*time.Second)
	defer wait()
	dctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := s.Drain(dctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Drain while the batch runs: %v, want context.DeadlineExceeded", err)
	}
	if took := time.Since(start); took > 2*time.Second { // well before the batch ends
		t.Errorf("Drain returned %v after it began, want at its context's end", took)
	}
	if err := s.Drain(ctx); err != nil {
		t.Fatalf("Drain once the batch is answered: %v", err)
	}
	// Nothing is left to do: the reservation is already released.
	if o, err := s.Begin(ctx, key, req, nil); err != nil || o.Kind != idem.Fresh || o.TakenOver {
		t.Errorf("Begin right after Drain = %v (taken over: %v), %v; want Fresh", o.Kind, o.TakenOver, err)
	}
}
