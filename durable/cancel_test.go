package durable_test

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemgo/idem/durable"
	"github.com/idemgo/idem/internal/syncbuf"
)

func TestCancelParkedInstanceByKey(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	b := setup(t, nil)
	id := b.insert(t, ctl.With(ctlState{}), &durable.InsertOpts{CorrelationKey: "order:1"})
	b.signal(t, durable.ByID(id), "x", nil, "")

	if err := b.client.Cancel(ctxT(t), durable.ByKey("order:1"), "customer left"); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	in := b.get(t, id)
	if in.Status != durable.StatusCancelled || in.Error != "customer left" || in.FinishedAt.IsZero() ||
		len(in.Inbox) != 0 || in.LeaseOwner != "" {
		t.Fatalf("cancelled instance: status %s, error %q, finished %v, inbox %d, lease %q",
			in.Status, in.Error, in.FinishedAt, len(in.Inbox), in.LeaseOwner)
	}
	// The key is free again, and signals no longer reach the instance.
	if err := b.client.Signal(ctxT(t), durable.ByID(id), "go", nil, ""); !errors.Is(err, durable.ErrNoTarget) {
		t.Fatalf("Signal to a cancelled instance: %v, want ErrNoTarget", err)
	}
	b.insert(t, ctl.With(ctlState{}), &durable.InsertOpts{CorrelationKey: "order:1"})
}

func TestCancelErrors(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	b := setup(t, nil)
	id := b.insert(t, ctl.With(ctlState{}), &durable.InsertOpts{CorrelationKey: "k"})
	if err := b.client.Cancel(ctxT(t), durable.ByID(id), ""); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		target durable.Target
		want   error
	}{
		{durable.ByID(id), durable.ErrTerminal},
		{durable.ByKey("k"), durable.ErrNoTarget},
		{durable.ByID(id + 100), durable.ErrNoTarget},
		{durable.Target{}, durable.ErrNoTarget},
	} {
		if err := b.client.Cancel(ctxT(t), tc.target, "again"); !errors.Is(err, tc.want) {
			t.Errorf("Cancel(%v): %v, want %v", tc.target, err, tc.want)
		}
	}
	if in := b.get(t, id); in.Error != "" {
		t.Errorf("a failed Cancel changed the error to %q", in.Error)
	}
}

// A step running while its instance is cancelled cannot commit: its Next
// is fenced off and the row stays cancelled, at the step it was at.
func TestCancelFencesTheRunningStep(t *testing.T) {
	t.Parallel()
	entered, release := make(chan struct{}), make(chan struct{})
	fsm := mustFSM(t, durable.FSMConfig[ctlState]{
		Name: "blocker", Initial: "block",
		Steps: map[string]durable.StepFunc[ctlState]{
			"block": func(ctx context.Context, s *durable.Step[ctlState]) (durable.Outcome, error) {
				close(entered)
				<-release
				s.State.Seen = append(s.State.Seen, "ran")
				return durable.Next("after"), nil
			},
			"after": func(ctx context.Context, s *durable.Step[ctlState]) (durable.Outcome, error) {
				return durable.Done(nil), nil
			},
		},
	})
	b := setup(t, fast(fsm))
	id := b.insert(t, fsm.With(ctlState{}), nil)
	b.start(t)
	<-entered
	if err := b.client.Cancel(ctxT(t), durable.ByID(id), "stop it"); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	close(release)
	waitFor(t, "the step's commit", func() bool { return len(b.events.stepEvents()) > 0 })
	if e := b.events.stepEvents()[0]; e.ID != id || e.Kind != durable.KindNext || !e.Fenced {
		t.Fatalf("step event %+v, want a fenced next of instance %d", e, id)
	}
	in := b.get(t, id)
	if in.Status != durable.StatusCancelled || in.Step != "block" || string(in.State) != "{}" || in.Error != "stop it" {
		t.Fatalf("after the fenced commit: status %s, step %s, state %s, error %q", in.Status, in.Step, in.State, in.Error)
	}
}

func TestCancelOutcome(t *testing.T) {
	t.Parallel()
	fsm := mustFSM(t, durable.FSMConfig[ctlState]{
		Name: "selfcancel", Initial: "wait",
		Steps: map[string]durable.StepFunc[ctlState]{
			"wait": func(ctx context.Context, s *durable.Step[ctlState]) (durable.Outcome, error) {
				if len(s.Awaited) > 0 {
					return durable.Cancel("not wanted"), nil
				}
				return durable.Await("wait", "cancel"), nil
			},
		},
	})
	b := setup(t, fast(fsm))
	id := b.insert(t, fsm.With(ctlState{}), &durable.InsertOpts{CorrelationKey: "self"})
	b.signal(t, durable.ByID(id), "other", nil, "")
	b.start(t)
	b.signal(t, durable.ByKey("self"), "cancel", nil, "")
	in := b.waitStatus(t, id, durable.StatusCancelled)
	if in.Error != "not wanted" || len(in.Inbox) != 0 || in.FinishedAt.IsZero() {
		t.Fatalf("cancelled by its step: error %q, inbox %d, finished %v", in.Error, len(in.Inbox), in.FinishedAt)
	}
	if got := durable.Cancel("r").String(); got != "cancel(r)" {
		t.Errorf("String() = %q", got)
	}
}

// isDeadlock reports a PostgreSQL deadlock (40P01).
func isDeadlock(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "40P01" || err != nil && strings.Contains(err.Error(), "deadlock")
}

// Cancelling a grandparent by id while its grandchildren end concurrently,
// round after round: no deadlock, in Cancel or in the engine's commits;
// every instance ends cancelled or done; no pending count is ever negative
// (a CHECK added for the test would reject the statement); nothing is left
// awaiting children or still to be counted.
func TestCancelGrandparentWhileGrandchildrenEnd(t *testing.T) {
	t.Parallel()
	const (
		rounds   = 60
		trees    = 4 // grandparents per round
		mids     = 2 // children per grandparent
		leaves   = 3 // grandchildren per child
		perRound = trees * mids * leaves
	)
	ctl := ctlFSM(t)
	spawn := func(name string, kids func() []durable.InsertParams) *durable.FSM[struct{}] {
		return mustFSM(t, durable.FSMConfig[struct{}]{
			Name: name, Initial: "spawn",
			Steps: map[string]durable.StepFunc[struct{}]{
				"spawn": func(context.Context, *durable.Step[struct{}]) (durable.Outcome, error) {
					return durable.Children("after", kids()...), nil
				},
				"after": func(context.Context, *durable.Step[struct{}]) (durable.Outcome, error) {
					return durable.Done(nil), nil
				},
			},
		})
	}
	n := func(f *durable.FSM[ctlState], k int) func() []durable.InsertParams {
		return func() []durable.InsertParams {
			out := make([]durable.InsertParams, k)
			for i := range out {
				out[i] = durable.InsertParams{Args: f.With(ctlState{})}
			}
			return out
		}
	}
	mid := spawn("mid", n(ctl, leaves))
	gp := spawn("grandparent", func() []durable.InsertParams {
		out := make([]durable.InsertParams, mids)
		for i := range out {
			out[i] = durable.InsertParams{Args: mid.With(struct{}{})}
		}
		return out
	})
	cfg := fast(ctl, mid, gp)
	cfg.Queues = map[string]durable.QueueConfig{durable.DefaultQueue: {Concurrency: 8}}
	logs := &syncbuf.Buffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	b := setup(t, cfg)
	b.exec(t, `ALTER TABLE durable_instance ADD CONSTRAINT test_pending_not_negative CHECK (pending_children >= 0)`)
	b.start(t)
	ctx := ctxT(t)

	var cancelled, ended int
	for round := range rounds {
		var gps []int64
		for range trees {
			gps = append(gps, b.insert(t, gp.With(struct{}{}), nil))
		}
		waitFor(t, "the grandchildren to await", func() bool {
			return b.count(t, `SELECT count(*) FROM durable_instance WHERE fsm = 'ctl' AND status = 'awaiting_signal'`) == perRound
		})
		var leafIDs []int64
		rows, err := b.pool.Query(ctx, `SELECT id FROM durable_instance WHERE fsm = 'ctl' AND status = 'awaiting_signal'`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			leafIDs = append(leafIDs, id)
		}
		if rows.Close(); rows.Err() != nil {
			t.Fatal(rows.Err())
		}

		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			errs  []error
			start = make(chan struct{})
		)
		record := func(err error) {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
		for _, id := range leafIDs {
			wg.Go(func() {
				<-start
				if err := b.client.Signal(ctx, durable.ByID(id), "finish", nil, ""); err != nil && !errors.Is(err, durable.ErrNoTarget) {
					record(err)
				}
			})
		}
		// One child per round is cancelled too, racing its parent's cascade.
		var midID int64
		if err := b.pool.QueryRow(ctx, `SELECT id FROM durable_instance WHERE fsm = 'mid' AND status = 'awaiting_children'
			ORDER BY random() LIMIT 1`).Scan(&midID); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			<-start
			time.Sleep(time.Duration(rand.IntN(15)) * time.Millisecond)
			if err := b.client.Cancel(ctx, durable.ByID(midID), "child over"); err != nil && !errors.Is(err, durable.ErrTerminal) {
				record(err)
			}
		})
		for _, id := range gps {
			delay := time.Duration(rand.IntN(15)) * time.Millisecond // into the grandchildren's commits
			wg.Go(func() {
				<-start
				time.Sleep(delay)
				err := b.client.Cancel(ctx, durable.ByID(id), "round over")
				switch {
				case err == nil:
					mu.Lock()
					cancelled++
					mu.Unlock()
				case errors.Is(err, durable.ErrTerminal): // the whole tree ended first
					mu.Lock()
					ended++
					mu.Unlock()
				default:
					record(err)
				}
			})
		}
		close(start)
		wg.Wait()
		for _, err := range errs {
			if isDeadlock(err) {
				var detail string
				if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) {
					detail = pe.Detail
				}
				t.Fatalf("round %d: deadlock: %v\n%s", round, err, detail)
			}
			t.Fatalf("round %d: %v", round, err)
		}
		waitFor(t, "every instance to end", func() bool {
			return b.count(t, `SELECT count(*) FROM durable_instance WHERE status NOT IN ('done', 'cancelled', 'failed')`) == 0
		})
	}

	for _, e := range b.events.stepEvents() {
		if e.CommitErr != nil {
			t.Errorf("instance %d step %s: commit failed: %v", e.ID, e.Step, e.CommitErr)
		}
	}
	if l := logs.String(); strings.Contains(l, "deadlock") || strings.Contains(l, "40P01") {
		t.Errorf("the engine logged a deadlock:\n%s", l)
	}
	for _, c := range []struct{ what, sql string }{
		{"not cancelled or done", `SELECT count(*) FROM durable_instance WHERE status NOT IN ('cancelled', 'done')`},
		{"still to release their parent", `SELECT count(*) FROM durable_instance WHERE releases_parent`},
		{"with a pending count", `SELECT count(*) FROM durable_instance WHERE pending_children <> 0`},
		{"awaiting children", `SELECT count(*) FROM durable_instance WHERE status = 'awaiting_children'`},
	} {
		if got := b.count(t, c.sql); got != 0 {
			t.Errorf("%d instances %s", got, c.what)
		}
	}
	if got, want := b.count(t, `SELECT count(*) FROM durable_instance`), rounds*trees*(1+mids+mids*leaves); got != want {
		t.Errorf("%d instances, want %d", got, want)
	}
	// The rounds raced: some grandchildren ended before the cancel reached
	// them, others were cancelled.
	leavesDone := b.count(t, `SELECT count(*) FROM durable_instance WHERE fsm = 'ctl' AND status = 'done'`)
	if leavesDone == 0 || leavesDone == rounds*perRound {
		t.Errorf("%d of %d grandchildren done: the cancels did not race their ends", leavesDone, rounds*perRound)
	}
	t.Logf("%d grandparents cancelled, %d ended before their cancel; %d of %d grandchildren done",
		cancelled, ended, leavesDone, rounds*perRound)
}

// Cancelling an instance deletes the inboxes of every descendant it
// cancels, grandchildren included.
func TestCancelDropsTheInboxesOfDescendants(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	mid := mustFSM(t, durable.FSMConfig[parentState]{
		Name: "mid", Initial: "spawn",
		Steps: map[string]durable.StepFunc[parentState]{
			"spawn": func(ctx context.Context, s *durable.Step[parentState]) (durable.Outcome, error) {
				return durable.Children("spawn", durable.InsertParams{Args: ctl.With(ctlState{})}), nil
			},
		},
	})
	var after atomic.Int32
	parent := parentFSM(t, func() []durable.InsertParams {
		return []durable.InsertParams{{Args: mid.With(parentState{})}}
	}, &after)
	b := setup(t, fast(ctl, mid, parent))
	b.start(t)
	p := b.insert(t, parent.With(parentState{}), nil)
	b.waitStatus(t, p, durable.StatusAwaitingChildren)
	m := b.childIDs(t, p)[0]
	b.waitStatus(t, m, durable.StatusAwaitingChildren)
	leaf := b.childIDs(t, m)[0]
	b.waitStatus(t, leaf, durable.StatusAwaitingSignal)
	b.signal(t, durable.ByID(leaf), "unawaited", 1, "")
	b.signal(t, durable.ByID(m), "unawaited", 2, "")

	if err := b.client.Cancel(ctxT(t), durable.ByID(p), "all"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []int64{m, leaf} {
		if in := b.get(t, id); in.Status != durable.StatusCancelled || len(in.Inbox) != 0 {
			t.Errorf("descendant %d: %s with inbox %v, want cancelled with none", id, in.Status, in.Inbox)
		}
	}
}
