package durable_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgo/idem/durable"
)

// parentState is the state of the parent FSM of the children tests.
type parentState struct {
	Children []int64 `json:"children,omitempty"`
}

// parentFSM spawns the children mk returns, then, in step "after", counts
// its runs in after and ends done.
func parentFSM(t testing.TB, mk func() []durable.InsertParams, after *atomic.Int32) *durable.FSM[parentState] {
	return mustFSM(t, durable.FSMConfig[parentState]{
		Name:    "parent",
		Initial: "spawn",
		Steps: map[string]durable.StepFunc[parentState]{
			"spawn": func(ctx context.Context, s *durable.Step[parentState]) (durable.Outcome, error) {
				return durable.Children("after", mk()...), nil
			},
			"after": func(ctx context.Context, s *durable.Step[parentState]) (durable.Outcome, error) {
				after.Add(1)
				return durable.Done(nil), nil
			},
		},
	})
}

// leafFSM ends done at once.
func leafFSM(t testing.TB) *durable.FSM[struct{}] {
	return mustFSM(t, durable.FSMConfig[struct{}]{
		Name:    "leaf",
		Initial: "run",
		Steps: map[string]durable.StepFunc[struct{}]{
			"run": func(ctx context.Context, s *durable.Step[struct{}]) (durable.Outcome, error) {
				return durable.Done(s.ID), nil
			},
		},
	})
}

// ctlChildren are n ctl children with keys prefix-0… .
func ctlChildren(ctl *durable.FSM[ctlState], prefix string, n int) []durable.InsertParams {
	out := make([]durable.InsertParams, n)
	for i := range out {
		out[i] = durable.InsertParams{Args: ctl.With(ctlState{}), Opts: &durable.InsertOpts{CorrelationKey: fmt.Sprintf("%s-%d", prefix, i)}}
	}
	return out
}

// childIDs returns the ids of parent's children, in id order.
func (b *testBundle) childIDs(t *testing.T, parent int64) []int64 {
	t.Helper()
	cs, err := b.client.ChildrenOf(ctxT(t), parent)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int64, len(cs))
	for i, c := range cs {
		ids[i] = c.ID
	}
	return ids
}

// waitingChildren waits until parent waits for its children and each of
// them waits for a signal, and returns their ids in id order.
func (b *testBundle) waitingChildren(t *testing.T, parent int64) []int64 {
	t.Helper()
	b.waitStatus(t, parent, durable.StatusAwaitingChildren)
	kids := b.childIDs(t, parent)
	for _, k := range kids {
		b.waitStatus(t, k, durable.StatusAwaitingSignal)
	}
	return kids
}

func (b *testBundle) pending(t *testing.T, parent int64) int {
	t.Helper()
	return b.count(t, "SELECT pending_children FROM durable_instance WHERE id = $1", parent)
}

func TestChildrenDoneFailedCancelledReleaseParentOnce(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	var after atomic.Int32
	parent := parentFSM(t, func() []durable.InsertParams { return ctlChildren(ctl, "c", 3) }, &after)
	b := setup(t, fast(ctl, parent))
	b.start(t)

	p := b.insert(t, parent.With(parentState{}), nil)
	b.waitStatus(t, p, durable.StatusAwaitingChildren)
	kids := b.childIDs(t, p)
	if len(kids) != 3 || b.pending(t, p) != 3 {
		t.Fatalf("children %v, pending %d; want 3 and 3", kids, b.pending(t, p))
	}
	for _, k := range kids {
		b.waitStatus(t, k, durable.StatusAwaitingSignal)
	}
	b.signal(t, durable.ByID(kids[0]), "finish", "ok", "")
	b.waitStatus(t, kids[0], durable.StatusDone)
	b.signal(t, durable.ByID(kids[1]), "fail", nil, "")
	b.waitStatus(t, kids[1], durable.StatusFailed)
	if got := b.get(t, p).Status; got != durable.StatusAwaitingChildren || b.pending(t, p) != 1 {
		t.Fatalf("parent %s with %d pending after two children ended; want awaiting_children, 1", got, b.pending(t, p))
	}
	if err := b.client.Cancel(ctxT(t), durable.ByKey("c-2"), "enough"); err != nil {
		t.Fatal(err)
	}
	b.waitStatus(t, p, durable.StatusDone)
	time.Sleep(50 * time.Millisecond)
	if n := after.Load(); n != 1 {
		t.Fatalf("the parent's next step ran %d times, want 1", n)
	}
	cs, err := b.client.ChildrenOf(ctxT(t), p)
	if err != nil {
		t.Fatal(err)
	}
	want := []durable.Status{durable.StatusDone, durable.StatusFailed, durable.StatusCancelled}
	for i, c := range cs {
		if c.Status != want[i] {
			t.Fatalf("child %d is %s, want %s", i, c.Status, want[i])
		}
	}
	if string(cs[0].Result) != `"ok"` || cs[2].Error != "enough" {
		t.Fatalf("children read back as %+v", cs)
	}
	if n := b.pending(t, p); n != 0 {
		t.Fatalf("pending %d, want 0", n)
	}
}

func TestChildrenWithOccupiedKeyAreDropped(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	var after atomic.Int32
	parent := parentFSM(t, func() []durable.InsertParams {
		cs := ctlChildren(ctl, "k", 3)
		return append(cs, cs[1]) // a duplicate within the batch
	}, &after)
	b := setup(t, fast(ctl, parent))
	b.start(t)

	occupant := b.insert(t, ctl.With(ctlState{}), &durable.InsertOpts{CorrelationKey: "k-0"})
	p := b.insert(t, parent.With(parentState{}), nil)
	b.waitStatus(t, p, durable.StatusAwaitingChildren)
	kids := b.childIDs(t, p)
	if len(kids) != 2 || b.pending(t, p) != 2 {
		t.Fatalf("children %v, pending %d; want 2 and 2", kids, b.pending(t, p))
	}
	for _, k := range kids {
		if k == occupant {
			t.Fatal("the occupant became a child")
		}
		b.waitStatus(t, k, durable.StatusAwaitingSignal)
		b.signal(t, durable.ByID(k), "finish", nil, "")
	}
	b.waitStatus(t, p, durable.StatusDone)
	if got := b.get(t, occupant).Status; got != durable.StatusAwaitingSignal {
		t.Fatalf("occupant is %s", got)
	}
	if n := after.Load(); n != 1 {
		t.Fatalf("the parent's next step ran %d times, want 1", n)
	}
}

func TestChildrenNoneInsertedProceedsAtOnce(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	var after atomic.Int32
	for _, tc := range []struct {
		name string
		mk   func() []durable.InsertParams
	}{
		{"empty", func() []durable.InsertParams { return nil }},
		{"all duplicates", func() []durable.InsertParams { return ctlChildren(ctl, "taken", 1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			after.Store(0)
			parent := parentFSM(t, tc.mk, &after)
			b := setup(t, fast(ctl, parent))
			b.start(t)
			b.insert(t, ctl.With(ctlState{}), &durable.InsertOpts{CorrelationKey: "taken-0"})
			p := b.insert(t, parent.With(parentState{}), nil)
			b.waitStatus(t, p, durable.StatusDone)
			if n := after.Load(); n != 1 {
				t.Fatalf("the parent's next step ran %d times, want 1", n)
			}
			if n := len(b.childIDs(t, p)); n != 0 {
				t.Fatalf("%d children", n)
			}
		})
	}
}

func TestChildrenFinishingConcurrentlyOnTwoEnginesWakeParentOnce(t *testing.T) {
	t.Parallel()
	const n = 50
	leaf := leafFSM(t)
	var after atomic.Int32
	parent := parentFSM(t, func() []durable.InsertParams {
		cs := make([]durable.InsertParams, n)
		for i := range cs {
			cs[i] = durable.InsertParams{Args: leaf.With(struct{}{})}
		}
		return cs
	}, &after)
	cfg := fast(leaf, parent)
	cfg.Queues = map[string]durable.QueueConfig{durable.DefaultQueue: {Concurrency: 8}}
	b := setup(t, cfg)
	second := newClient(t, newPool(t, b.url), cfg, &recorder{})
	b.start(t)
	startClient(t, second)

	var ps []int64
	for range 3 {
		ps = append(ps, b.insert(t, parent.With(parentState{}), nil))
	}
	for _, p := range ps {
		b.waitStatus(t, p, durable.StatusDone)
		if got := len(b.childIDs(t, p)); got != n {
			t.Fatalf("%d children, want %d", got, n)
		}
		if got := b.pending(t, p); got != 0 {
			t.Fatalf("pending %d, want 0", got)
		}
	}
	time.Sleep(50 * time.Millisecond)
	if got := after.Load(); got != int32(len(ps)) {
		t.Fatalf("the parents' next step ran %d times, want %d", got, len(ps))
	}
	if c := b.count(t, "SELECT count(*) FROM durable_instance WHERE releases_parent OR (parent_id IS NOT NULL AND status <> 'done')"); c != 0 {
		t.Fatalf("%d children not done or not counted", c)
	}
}

func TestGCSparesChildrenOfWaitingParent(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	var after atomic.Int32
	parent := parentFSM(t, func() []durable.InsertParams { return ctlChildren(ctl, "g", 2) }, &after)
	cfg := fast(ctl, parent)
	cfg.GCRetention, cfg.GCInterval = time.Millisecond, 10*time.Millisecond
	b := setup(t, cfg)
	b.start(t)

	p := b.insert(t, parent.With(parentState{}), nil)
	b.waitStatus(t, p, durable.StatusAwaitingChildren)
	kids := b.childIDs(t, p)
	b.waitStatus(t, kids[0], durable.StatusAwaitingSignal)
	b.signal(t, durable.ByID(kids[0]), "finish", nil, "")
	b.waitStatus(t, kids[0], durable.StatusDone)
	// A plain terminal row is collected meanwhile; the child is not.
	other := b.insert(t, ctl.With(ctlState{}), nil)
	b.waitStatus(t, other, durable.StatusAwaitingSignal)
	b.signal(t, durable.ByID(other), "finish", nil, "")
	waitFor(t, "the plain row to be collected", func() bool {
		return b.count(t, "SELECT count(*) FROM durable_instance WHERE id = $1", other) == 0
	})
	if b.count(t, "SELECT count(*) FROM durable_instance WHERE id = $1", kids[0]) != 1 {
		t.Fatal("GC deleted the child of a waiting parent")
	}
	b.waitStatus(t, kids[1], durable.StatusAwaitingSignal)
	b.signal(t, durable.ByID(kids[1]), "finish", nil, "")
	waitFor(t, "the parent and its children to be collected", func() bool {
		return b.count(t, "SELECT count(*) FROM durable_instance WHERE id = $1 OR parent_id = $1", p) == 0
	})
	if n := after.Load(); n != 1 {
		t.Fatalf("the parent's next step ran %d times, want 1", n)
	}
}

func TestCancelParentCascadesToLiveChildren(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	var after atomic.Int32
	parent := parentFSM(t, func() []durable.InsertParams { return ctlChildren(ctl, "x", 3) }, &after)
	b := setup(t, fast(ctl, parent))
	b.start(t)

	p := b.insert(t, parent.With(parentState{}), nil)
	kids := b.waitingChildren(t, p)
	b.signal(t, durable.ByID(kids[0]), "finish", nil, "")
	b.waitStatus(t, kids[0], durable.StatusDone)
	b.signal(t, durable.ByID(kids[1]), "go", 1, "") // pending in its inbox when cancelled

	var wg sync.WaitGroup
	wg.Go(func() { // a child ending while its parent is cancelled: no deadlock
		_ = b.client.Signal(context.Background(), durable.ByID(kids[2]), "finish", nil, "")
	})
	if err := b.client.Cancel(ctxT(t), durable.ByID(p), "stop all"); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if got := b.get(t, p).Status; got != durable.StatusCancelled {
		t.Fatalf("parent is %s", got)
	}
	if got := b.get(t, kids[0]).Status; got != durable.StatusDone {
		t.Fatalf("ended child is %s", got)
	}
	in := b.waitStatus(t, kids[1], durable.StatusCancelled)
	if in.Error != "stop all" || len(in.Inbox) != 0 {
		t.Fatalf("cancelled child: error %q, inbox %v", in.Error, in.Inbox)
	}
	waitFor(t, "the last child to end", func() bool { return b.get(t, kids[2]).Status.Terminal() })
	time.Sleep(50 * time.Millisecond)
	if n := after.Load(); n != 0 {
		t.Fatalf("the cancelled parent's next step ran %d times", n)
	}
	if n := b.count(t, "SELECT count(*) FROM durable_instance WHERE releases_parent"); n != 0 {
		t.Fatalf("%d children still to be counted", n)
	}
}

func TestChildRetriedAfterFailureDoesNotHoldParentAgain(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	var after atomic.Int32
	parent := parentFSM(t, func() []durable.InsertParams { return ctlChildren(ctl, "r", 1) }, &after)
	b := setup(t, fast(ctl, parent))
	b.start(t)

	p := b.insert(t, parent.With(parentState{}), nil)
	b.waitStatus(t, p, durable.StatusAwaitingChildren)
	kid := b.childIDs(t, p)[0]
	b.waitStatus(t, kid, durable.StatusAwaitingSignal)
	b.signal(t, durable.ByKey("r-0"), "fail", nil, "")
	b.waitStatus(t, kid, durable.StatusFailed)
	b.waitStatus(t, p, durable.StatusDone)
	if _, err := b.client.Retry(ctxT(t), durable.ByID(kid), nil); err != nil {
		t.Fatal(err)
	}
	b.waitStatus(t, kid, durable.StatusAwaitingSignal)
	// Cancelled by key, the retried child has no parent to release.
	if err := b.client.Cancel(ctxT(t), durable.ByKey("r-0"), ""); err != nil {
		t.Fatal(err)
	}
	b.waitStatus(t, kid, durable.StatusCancelled)
	if n := b.pending(t, p); n != 0 {
		t.Fatalf("pending %d, want 0", n)
	}
	if n := after.Load(); n != 1 {
		t.Fatalf("the parent's next step ran %d times, want 1", n)
	}
}

func TestInvalidChildrenAreAStepError(t *testing.T) {
	t.Parallel()
	var after atomic.Int32
	parent := parentFSM(t, func() []durable.InsertParams { return []durable.InsertParams{{}} }, &after)
	cfg := fast(parent)
	b := setup(t, cfg)
	b.start(t)
	p := b.insert(t, parent.With(parentState{}), nil)
	waitFor(t, "the step error", func() bool { return b.get(t, p).Error != "" })
	if in := b.get(t, p); in.Status == durable.StatusAwaitingChildren || !strings.Contains(in.Error, "Children[0]") {
		t.Fatalf("parent is %s with error %q", in.Status, in.Error)
	}
	if n := b.count(t, "SELECT count(*) FROM durable_instance"); n != 1 {
		t.Fatalf("%d rows, want the parent only", n)
	}
}

func TestCancelCascadesToGrandchildren(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	var after, midAfter atomic.Int32
	mid := mustFSM(t, durable.FSMConfig[parentState]{
		Name:    "mid",
		Initial: "spawn",
		Steps: map[string]durable.StepFunc[parentState]{
			"spawn": func(ctx context.Context, s *durable.Step[parentState]) (durable.Outcome, error) {
				return durable.Children("after", ctlChildren(ctl, fmt.Sprintf("gc-%d", s.ID), 2)...), nil
			},
			"after": func(ctx context.Context, s *durable.Step[parentState]) (durable.Outcome, error) {
				midAfter.Add(1)
				return durable.Done(nil), nil
			},
		},
	})
	parent := parentFSM(t, func() []durable.InsertParams {
		return []durable.InsertParams{{Args: mid.With(parentState{})}, {Args: mid.With(parentState{})}}
	}, &after)
	b := setup(t, fast(ctl, mid, parent))
	b.start(t)

	p := b.insert(t, parent.With(parentState{}), nil)
	b.waitStatus(t, p, durable.StatusAwaitingChildren)
	mids := b.childIDs(t, p)
	var leaves []int64
	for _, m := range mids {
		b.waitStatus(t, m, durable.StatusAwaitingChildren)
		leaves = append(leaves, b.childIDs(t, m)...)
	}
	if len(leaves) != 4 {
		t.Fatalf("%d grandchildren, want 4", len(leaves))
	}
	if err := b.client.Cancel(ctxT(t), durable.ByID(p), "all"); err != nil {
		t.Fatal(err)
	}
	for _, id := range append(mids, leaves...) {
		if got := b.get(t, id).Status; got != durable.StatusCancelled {
			t.Fatalf("descendant %d is %s", id, got)
		}
	}
	time.Sleep(50 * time.Millisecond)
	if after.Load() != 0 || midAfter.Load() != 0 {
		t.Fatal("a cancelled parent ran its next step")
	}
	if n := b.count(t, "SELECT count(*) FROM durable_instance WHERE releases_parent OR pending_children <> 0"); n != 0 {
		t.Fatalf("%d rows still counting", n)
	}
}

// Children whose state is over Config.MaxPayload are a step error of the
// parent's step (a *PayloadTooLargeError), as Insert rejects them; none is
// inserted to fail on its own.
func TestOversizedChildrenAreAStepError(t *testing.T) {
	t.Parallel()
	type big struct{ Blob string }
	child := mustFSM(t, durable.FSMConfig[big]{Name: "big-child", Initial: "run", Steps: map[string]durable.StepFunc[big]{
		"run": func(context.Context, *durable.Step[big]) (durable.Outcome, error) { return durable.Done(nil), nil },
	}})
	var after atomic.Int32
	parent := parentFSM(t, func() []durable.InsertParams {
		return []durable.InsertParams{{Args: child.With(big{Blob: strings.Repeat("x", 5000)})}}
	}, &after)
	cfg := fast(child, parent)
	cfg.MaxPayload = 1000
	b := setup(t, cfg)
	b.start(t)
	p := b.insert(t, parent.With(parentState{}), nil)
	waitFor(t, "the parent's step to fail", func() bool { return b.get(t, p).Attempt >= 2 })
	if in := b.get(t, p); !strings.Contains(in.Error, "larger than Config.MaxPayload") {
		t.Errorf("parent after its Children outcome: %s, error %q; want the payload error", in.Status, in.Error)
	}
	if n := b.count(t, "SELECT count(*) FROM durable_instance WHERE fsm = 'big-child'"); n != 0 {
		t.Errorf("%d oversized children inserted", n)
	}
}

// A child that failed and was revived by Client.Retry is counted by its
// parent no more, but is still its child: cancelling the parent cancels it.
func TestCancelReachesRetriedChildren(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	var after atomic.Int32
	parent := parentFSM(t, func() []durable.InsertParams { return ctlChildren(ctl, "retried", 2) }, &after)
	b := setup(t, fast(ctl, parent))
	b.start(t)
	p := b.insert(t, parent.With(parentState{}), nil)
	kids := b.waitingChildren(t, p)
	b.signal(t, durable.ByID(kids[0]), "fail", nil, "")
	b.waitStatus(t, kids[0], durable.StatusFailed)
	if _, err := b.client.Retry(ctxT(t), durable.ByID(kids[0]), nil); err != nil {
		t.Fatal(err)
	}
	b.waitStatus(t, kids[0], durable.StatusAwaitingSignal)
	if err := b.client.Cancel(ctxT(t), durable.ByID(p), "stop all"); err != nil {
		t.Fatal(err)
	}
	for _, k := range kids {
		if in := b.get(t, k); in.Status != durable.StatusCancelled {
			t.Errorf("child %d after its parent was cancelled: %s, want cancelled", k, in.Status)
		}
	}
	if in := b.get(t, p); in.Status != durable.StatusCancelled || after.Load() != 0 {
		t.Errorf("parent: %s, step after ran %d times", in.Status, after.Load())
	}
}

// Cancel's cascade goes through ended children: a grandchild revived by
// Client.Retry under a child that has since ended is cancelled with its
// grandparent.
func TestCancelReachesRevivedGrandchildren(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	mid := mustFSM(t, durable.FSMConfig[parentState]{
		Name: "mid", Initial: "spawn",
		Steps: map[string]durable.StepFunc[parentState]{
			"spawn": func(context.Context, *durable.Step[parentState]) (durable.Outcome, error) {
				return durable.Children("after", durable.InsertParams{Args: ctl.With(ctlState{})}), nil
			},
			"after": func(context.Context, *durable.Step[parentState]) (durable.Outcome, error) {
				return durable.Done(nil), nil
			},
		},
	})
	top := mustFSM(t, durable.FSMConfig[parentState]{
		Name: "top", Initial: "spawn",
		Steps: map[string]durable.StepFunc[parentState]{
			"spawn": func(context.Context, *durable.Step[parentState]) (durable.Outcome, error) {
				return durable.Children("wait", durable.InsertParams{Args: mid.With(parentState{})}), nil
			},
			"wait": func(context.Context, *durable.Step[parentState]) (durable.Outcome, error) {
				return durable.Await("wait", "never"), nil
			},
		},
	})
	b := setup(t, fast(ctl, mid, top))
	b.start(t)
	p := b.insert(t, top.With(parentState{}), nil)
	b.waitStatus(t, p, durable.StatusAwaitingChildren)
	m := b.childIDs(t, p)[0]
	b.waitStatus(t, m, durable.StatusAwaitingChildren)
	g := b.childIDs(t, m)[0]
	b.waitStatus(t, g, durable.StatusAwaitingSignal)
	b.signal(t, durable.ByID(g), "fail", nil, "") // g fails, m ends done, p awaits "never"
	b.waitStatus(t, m, durable.StatusDone)
	b.waitStatus(t, p, durable.StatusAwaitingSignal)
	if _, err := b.client.Retry(ctxT(t), durable.ByID(g), nil); err != nil {
		t.Fatal(err)
	}
	b.waitStatus(t, g, durable.StatusAwaitingSignal)
	if err := b.client.Cancel(ctxT(t), durable.ByID(p), "stop the tree"); err != nil {
		t.Fatal(err)
	}
	if in := b.get(t, g); in.Status != durable.StatusCancelled {
		t.Errorf("grandchild under an ended child after its grandparent was cancelled: %s, want cancelled", in.Status)
	}
	if in := b.get(t, m); in.Status != durable.StatusDone {
		t.Errorf("ended child: %s, want still done", in.Status)
	}
}

// A step's Cancel outcome ends the instance as Client.Cancel does: its
// live children (here one revived by Client.Retry) are cancelled too.
func TestCancelOutcomeCancelsLiveChildren(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	top := mustFSM(t, durable.FSMConfig[parentState]{
		Name: "top", Initial: "spawn",
		Steps: map[string]durable.StepFunc[parentState]{
			"spawn": func(context.Context, *durable.Step[parentState]) (durable.Outcome, error) {
				return durable.Children("wait", durable.InsertParams{Args: ctl.With(ctlState{})}), nil
			},
			"wait": func(context.Context, *durable.Step[parentState]) (durable.Outcome, error) {
				return durable.Await("decide", "abort"), nil
			},
			"decide": func(context.Context, *durable.Step[parentState]) (durable.Outcome, error) {
				return durable.Cancel("aborted by the process"), nil
			},
		},
	})
	b := setup(t, fast(ctl, top))
	b.start(t)
	p := b.insert(t, top.With(parentState{}), nil)
	b.waitStatus(t, p, durable.StatusAwaitingChildren)
	c := b.childIDs(t, p)[0]
	b.waitStatus(t, c, durable.StatusAwaitingSignal)
	b.signal(t, durable.ByID(c), "fail", nil, "")
	b.waitStatus(t, p, durable.StatusAwaitingSignal)
	if _, err := b.client.Retry(ctxT(t), durable.ByID(c), nil); err != nil {
		t.Fatal(err)
	}
	b.waitStatus(t, c, durable.StatusAwaitingSignal)
	b.signal(t, durable.ByID(p), "abort", nil, "")
	b.waitStatus(t, p, durable.StatusCancelled)
	if in := b.get(t, c); in.Status != durable.StatusCancelled || in.Error != "aborted by the process" {
		t.Errorf("live child after its parent returned Cancel: %s, error %q; want cancelled with the parent's reason", in.Status, in.Error)
	}
}
