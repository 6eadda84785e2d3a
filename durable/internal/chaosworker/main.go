// Command chaosworker is the worker process of durable's crash-chaos test
// (TestChaosSIGKILLedWorkers): it runs one engine on the database its
// -db flag names, as engine -id, until SIGTERM (a graceful stop) or
// SIGKILL, with three FSMs whose steps leave a trace the test checks:
//
//   - "effect": steps a, b and c, each recording an effect in
//     chaos_effect, keyed by the instance and its claim (idempotent per
//     attempt), and adding the effect's amount to the state; an instance
//     whose state names a step fails there with Stop.
//   - "signals": awaits "ping" signals and lists their payloads in its
//     state, until it has Want of them.
//   - "parent": inserts Kids "effect" children and, once they have ended,
//     counts those done and failed.
//
// Every step records its execution in chaos_exec: the engine, the
// instance, the claim count it runs under (its lease fence), when it
// started and ended (Unix nanoseconds of this machine's clock) and the
// cause its context was cancelled with, if it was. The test creates the
// tables before it starts any worker. The worker prints "started" once
// its engine runs.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem/durable"
)

// The engine's timing: short leases, so that the rows of a killed worker
// come back quickly.
const (
	leaseTTL    = 2 * time.Second
	heartbeat   = 300 * time.Millisecond
	reaperEvery = 100 * time.Millisecond
	pollEvery   = 50 * time.Millisecond
	concurrency = 6
)

// EffectState is the state of the "effect" FSM.
type EffectState struct {
	Seq    int      `json:"seq"`               // outcomes committed so far
	Total  int      `json:"total"`             // the sum of the effects' amounts
	Steps  []string `json:"steps"`             // the steps whose effect was recorded
	FailAt string   `json:"fail_at,omitempty"` // the step that stops the instance
	Flaky  bool     `json:"flaky,omitempty"`   // step b fails at its first attempt
}

// SignalsState is the state of the "signals" FSM.
type SignalsState struct {
	Seq  int      `json:"seq"`
	Want int      `json:"want"`
	Got  []string `json:"got"` // the payloads of the signals consumed, in order
}

// ParentState is the state of the "parent" FSM.
type ParentState struct {
	Seq  int           `json:"seq"`
	Kids []EffectState `json:"kids"`
}

// ParentResult is the result of a "parent" instance.
type ParentResult struct {
	Done   int `json:"done"`
	Failed int `json:"failed"`
}

// Amount is the amount of the effect of step of instance id.
func Amount(id int64, step string) int { return int(id%7) + int(step[0]-'a') + 1 }

// errFenced is the error of a step that found its lease gone as it began.
var errFenced = errors.New("chaosworker: the step's lease is gone")

// worker holds what the steps need.
type worker struct {
	id     string
	pool   *pgxpool.Pool
	client *durable.Client
}

// begin records the start of a step of instance id, at attempt, under the
// claim this engine holds, and returns the claim count and the function
// that records its end, to be deferred. It fails with errFenced when the
// row is no longer leased to this engine at that attempt.
func (w *worker) begin(ctx context.Context, id int64, attempt int, step string) (int64, func(), error) {
	start := time.Now().UnixNano()
	end := func() {
		at := time.Now().UnixNano()
		cause := ""
		if err := context.Cause(ctx); err != nil {
			cause = err.Error()
		}
		ectx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := w.pool.Exec(ectx, `UPDATE chaos_exec SET end_ns = $4, cause = $5 WHERE owner = $1 AND id = $2 AND start_ns = $3`,
			w.id, id, start, at, cause); err != nil {
			fmt.Fprintf(os.Stderr, "chaosworker %s: end of a step of %d: %v\n", w.id, id, err)
		}
	}
	var claims int64
	err := w.pool.QueryRow(ctx, `
INSERT INTO chaos_exec (owner, id, claims, attempt, step, start_ns)
SELECT $2, id, claims, attempt, step, $5 FROM durable_instance
WHERE id = $1 AND status = 'executing' AND lease_owner = $2 AND attempt = $3 AND step = $4
RETURNING claims`, id, w.id, attempt, step, start).Scan(&claims)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, nil, errFenced
	case err != nil:
		end() // the insert may have been committed all the same
		return 0, nil, err
	}
	return claims, end, nil
}

// work takes a few tens of milliseconds, or until ctx ends.
func work(ctx context.Context) error {
	t := time.NewTimer(time.Duration(5+rand.IntN(50)) * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// recorded is the StepFunc of step, whose runs are recorded (see begin)
// and, when working, take a few tens of milliseconds of work first; step
// gets the claim count its run is recorded under.
func recorded[S any](w *worker, working bool, step func(ctx context.Context, s *durable.Step[S], claims int64) (durable.Outcome, error)) durable.StepFunc[S] {
	return func(ctx context.Context, s *durable.Step[S]) (durable.Outcome, error) {
		claims, end, err := w.begin(ctx, s.ID, s.Attempt, s.Name)
		if err != nil {
			return durable.Outcome{}, err
		}
		defer end()
		if working {
			if err := work(ctx); err != nil {
				return durable.Outcome{}, err
			}
		}
		return step(ctx, s, claims)
	}
}

func (w *worker) effectStep(next string) durable.StepFunc[EffectState] {
	return recorded(w, true, func(ctx context.Context, s *durable.Step[EffectState], claims int64) (durable.Outcome, error) {
		if s.Name == "b" && s.State.Flaky && s.Attempt == 1 {
			return durable.Outcome{}, errors.New("chaosworker: planned transient failure")
		}
		s.State.Seq++
		if s.Name == s.State.FailAt {
			return durable.Stop("planned failure at " + s.Name), nil
		}
		amount := Amount(s.ID, s.Name)
		if _, err := w.pool.Exec(ctx, `
INSERT INTO chaos_effect (id, claims, step, amount, owner) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (id, claims) DO NOTHING`, s.ID, claims, s.Name, amount, w.id); err != nil {
			return durable.Outcome{}, err
		}
		s.State.Total += amount
		s.State.Steps = append(s.State.Steps, s.Name)
		if next == "" {
			return durable.Done(s.State.Total), nil
		}
		return durable.Next(next), nil
	})
}

func (w *worker) signalsStep(ctx context.Context, s *durable.Step[SignalsState], _ int64) (durable.Outcome, error) {
	s.State.Seq++
	for _, sig := range s.Awaited {
		var p string
		if err := json.Unmarshal(sig.Payload, &p); err != nil {
			return durable.Outcome{}, err
		}
		s.State.Got = append(s.State.Got, p)
	}
	if len(s.State.Got) >= s.State.Want {
		return durable.Done(s.State.Got), nil
	}
	return durable.Await("got", "ping"), nil
}

func (w *worker) fanStep(ctx context.Context, s *durable.Step[ParentState], _ int64) (durable.Outcome, error) {
	s.State.Seq++
	kids := make([]durable.InsertParams, len(s.State.Kids))
	for i, k := range s.State.Kids {
		kids[i] = durable.InsertParams{Args: effectFSM.With(k)}
	}
	return durable.Children("joined", kids...), nil
}

func (w *worker) joinedStep(ctx context.Context, s *durable.Step[ParentState], _ int64) (durable.Outcome, error) {
	kids, err := w.client.ChildrenOf(ctx, s.ID)
	if err != nil {
		return durable.Outcome{}, err
	}
	var r ParentResult
	for _, k := range kids {
		switch k.Status {
		case durable.StatusDone:
			r.Done++
		case durable.StatusFailed:
			r.Failed++
		default:
			return durable.Outcome{}, fmt.Errorf("chaosworker: child %d of %d is %s", k.ID, s.ID, k.Status)
		}
	}
	s.State.Seq++
	return durable.Done(r), nil
}

// effectFSM is the "effect" FSM, its steps set by main (a parent's
// children are made with its With).
var effectFSM *durable.FSM[EffectState]

func main() {
	db := flag.String("db", "", "the database URL")
	id := flag.String("id", "", "the engine's Config.ID")
	flag.Parse()
	if err := run(*db, *id); err != nil {
		fmt.Fprintf(os.Stderr, "chaosworker %s: %v\n", *id, err)
		os.Exit(1)
	}
}

func run(db, id string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if db == "" || id == "" {
		return errors.New("-db and -id are required")
	}
	pc, err := pgxpool.ParseConfig(db)
	if err != nil {
		return err
	}
	pc.MaxConns = 2*concurrency + 6
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		return err
	}
	defer pool.Close()
	w := &worker{id: id, pool: pool}

	retryFast := func(int) time.Duration { return 20 * time.Millisecond }
	effectFSM, err = durable.NewFSM(durable.FSMConfig[EffectState]{
		Name: "effect", Initial: "a", Backoff: retryFast,
		Steps: map[string]durable.StepFunc[EffectState]{
			"a": w.effectStep("b"), "b": w.effectStep("c"), "c": w.effectStep(""),
		},
	})
	if err != nil {
		return err
	}
	signalsFSM, err := durable.NewFSM(durable.FSMConfig[SignalsState]{
		Name: "signals", Initial: "start", Backoff: retryFast,
		Steps: map[string]durable.StepFunc[SignalsState]{"start": recorded(w, true, w.signalsStep), "got": recorded(w, true, w.signalsStep)},
	})
	if err != nil {
		return err
	}
	parentFSM, err := durable.NewFSM(durable.FSMConfig[ParentState]{
		Name: "parent", Initial: "fan", Backoff: retryFast,
		Steps: map[string]durable.StepFunc[ParentState]{"fan": recorded(w, true, w.fanStep), "joined": recorded(w, false, w.joinedStep)},
	})
	if err != nil {
		return err
	}

	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	w.client, err = durable.NewClient(pool, &durable.Config{
		ID:                id,
		FSMs:              []durable.Definition{effectFSM, signalsFSM, parentFSM},
		Queues:            map[string]durable.QueueConfig{durable.DefaultQueue: {Concurrency: concurrency}},
		PollInterval:      pollEvery,
		LeaseTTL:          leaseTTL,
		HeartbeatInterval: heartbeat,
		ReaperInterval:    reaperEvery,
		Logger:            logger,
		Hooks: durable.Hooks{StepStop: func(e durable.StepStopEvent) {
			if e.Fenced {
				fmt.Fprintf(os.Stderr, "fenced %d %s\n", e.ID, e.Step)
			}
		}},
	})
	if err != nil {
		return err
	}
	if err := w.client.Start(context.Background()); err != nil {
		return err
	}
	fmt.Println("started")
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return w.client.Stop(stopCtx)
}
