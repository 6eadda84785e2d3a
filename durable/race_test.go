package durable

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem/internal/pgtest"
)

// TestLostWakeUpRace races an Await commit (the park) against a Signal of
// the awaited name, thousands of times, from several workers at once, with
// random delays on both sides, and checks after each race that the
// instance was woken: never parked with the awaited signal in its inbox.
// A quarter of the races send a name that is not awaited, which must leave
// the instance parked.
func TestLostWakeUpRace(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pc, err := pgxpool.ParseConfig(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	pc.MaxConns = 20
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	c, err := NewClient(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	noop := func(context.Context, *Step[struct{}]) (Outcome, error) { return Done(nil), nil }
	fsm, err := NewFSM(FSMConfig[struct{}]{Name: "race", Initial: "a", Steps: map[string]StepFunc[struct{}]{"a": noop, "b": noop}})
	if err != nil {
		t.Fatal(err)
	}

	const workers, races = 8, 300 // 2400 races
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			for i := range races {
				queue := fmt.Sprintf("q%d-%d", w, i) // one row per queue: the claim picks it
				if err := race(ctx, c, fsm, queue, i%4 != 0, rng.IntN(200), rng.IntN(200)); err != nil {
					errs <- fmt.Errorf("worker %d, race %d: %w", w, i, err)
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

	var lost, woken, parked int
	if err := pool.QueryRow(ctx, `
SELECT count(*) FILTER (WHERE status = 'awaiting_signal' AND EXISTS (
           SELECT 1 FROM durable_signal s WHERE s.instance_id = i.id AND s.name = ANY (i.awaiting))),
       count(*) FILTER (WHERE status = 'runnable'),
       count(*) FILTER (WHERE status = 'awaiting_signal')
FROM durable_instance i`).Scan(&lost, &woken, &parked); err != nil {
		t.Fatal(err)
	}
	if lost != 0 || woken != workers*races*3/4 || parked != workers*races/4 {
		t.Fatalf("%d lost wake-ups, %d woken, %d parked; want 0, %d, %d", lost, woken, parked, workers*races*3/4, workers*races/4)
	}
}

// race inserts an instance, claims it, and then parks it (Await "go")
// while a signal named "go" (match) or "nope" is sent, each side after
// spinning a random while. It checks the instance's status afterwards.
func race(ctx context.Context, c *Client, fsm *FSM[struct{}], queue string, match bool, spinPark, spinSignal int) error {
	id, err := c.Insert(ctx, fsm.With(struct{}{}), &InsertOpts{Queue: queue})
	if err != nil {
		return err
	}
	cs, err := claim(ctx, c.pool, queue, 1, "racer", time.Minute)
	if err != nil || len(cs) != 1 {
		return fmt.Errorf("claim: %d rows, %v", len(cs), err)
	}
	name := "nope"
	if match {
		name = "go"
	}
	var (
		wg        sync.WaitGroup
		start     = make(chan struct{})
		res       commitResult
		parkErr   error
		signalErr error
		spin      = func(n int) {
			for range n {
				runtime.Gosched()
			}
		}
	)
	wg.Go(func() {
		<-start
		spin(spinPark)
		res, parkErr = commit(ctx, c.pool, "racer", cs[0], ranStep{outcome: Await("b", "go"), state: cs[0].state})
	})
	wg.Go(func() {
		<-start
		spin(spinSignal)
		signalErr = c.Signal(ctx, ByID(id), name, nil, "")
	})
	close(start)
	wg.Wait()
	if parkErr != nil || signalErr != nil || !res.committed {
		return fmt.Errorf("park: %+v %v; signal: %v", res, parkErr, signalErr)
	}
	var status Status
	if err := c.pool.QueryRow(ctx, "SELECT status FROM durable_instance WHERE id = $1", id).Scan(&status); err != nil {
		return err
	}
	want := StatusAwaitingSignal
	if match {
		want = StatusRunnable
	}
	if status != want {
		return fmt.Errorf("instance %d is %s after signal %q, want %s", id, status, name, want)
	}
	return nil
}
