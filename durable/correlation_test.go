package durable_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemgo/idem/durable"
)

// live+done+failed (every end but cancelled: see
// TestCK3_CancelledInstanceKeepsKeyOnlyWithCancelledInScope), and live+done.
var (
	scopeKeepDoneFailed = append(durable.LiveStatuses(), durable.StatusDone, durable.StatusFailed)
	scopeKeepDone       = append(durable.LiveStatuses(), durable.StatusDone)
)

// wantDuplicate checks that err reports key occupied by id.
func wantDuplicate(t *testing.T, err error, key string, id int64) {
	t.Helper()
	if !errors.Is(err, durable.ErrDuplicate) {
		t.Fatalf("Insert with occupied key %q: error %v, want ErrDuplicate", key, err)
	}
	var de *durable.DuplicateError
	if !errors.As(err, &de) {
		t.Fatalf("error %T is not a *DuplicateError", err)
	}
	if de.ID != id || de.CorrelationKey != key {
		t.Fatalf("DuplicateError{ID: %d, Key: %q}, want {ID: %d, Key: %q}", de.ID, de.CorrelationKey, id, key)
	}
}

func TestCK1_DuplicateWhileLiveCarriesExistingID(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	b := setup(t, nil) // no engine: the instance stays runnable
	id := b.insert(t, ctl.With(ctlState{}), &durable.InsertOpts{CorrelationKey: "order:42"})

	_, err := b.client.Insert(ctxT(t), ctl.With(ctlState{}), &durable.InsertOpts{CorrelationKey: "order:42"})
	wantDuplicate(t, err, "order:42", id)
	if n := b.count(t, "SELECT count(*) FROM durable_instance"); n != 1 {
		t.Fatalf("%d rows after a duplicate insert, want 1", n)
	}

	// Also in the caller's transaction.
	tx, err := b.pool.Begin(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.client.InsertTx(ctxT(t), tx, ctl.With(ctlState{}), &durable.InsertOpts{CorrelationKey: "order:42"})
	wantDuplicate(t, err, "order:42", id)
	if err := tx.Commit(ctxT(t)); err != nil {
		t.Fatalf("the transaction is still usable after a duplicate: %v", err)
	}

	// Inserts without a key never conflict.
	for range 3 {
		b.insert(t, ctl.With(ctlState{}), nil)
	}
	if n := b.count(t, "SELECT count(*) FROM durable_instance"); n != 4 {
		t.Fatalf("%d rows, want 4", n)
	}
}

func TestCK1_DuplicateWhileAwaitingSignal(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	b := setup(t, fast(ctl))
	b.start(t)
	id := b.insert(t, ctl.With(ctlState{}), &durable.InsertOpts{CorrelationKey: "k"})
	b.waitStatus(t, id, durable.StatusAwaitingSignal)
	_, err := b.client.Insert(ctxT(t), ctl.With(ctlState{}), &durable.InsertOpts{CorrelationKey: "k"})
	wantDuplicate(t, err, "k", id)
}

func TestCK2_KeyFreedAfterTermination(t *testing.T) {
	t.Parallel()
	for _, end := range []struct {
		signal string
		status durable.Status
	}{{"finish", durable.StatusDone}, {"fail", durable.StatusFailed}} {
		t.Run(string(end.status), func(t *testing.T) {
			t.Parallel()
			ctl := ctlFSM(t)
			b := setup(t, fast(ctl))
			b.start(t)
			first := b.insert(t, ctl.With(ctlState{}), &durable.InsertOpts{CorrelationKey: "k"})
			b.waitStatus(t, first, durable.StatusAwaitingSignal)
			b.signal(t, durable.ByKey("k"), end.signal, nil, "")
			b.waitStatus(t, first, end.status)

			second := b.insert(t, ctl.With(ctlState{}), &durable.InsertOpts{CorrelationKey: "k"})
			b.waitStatus(t, second, durable.StatusAwaitingSignal)
			b.signal(t, durable.ByKey("k"), "go", "to-second", "")
			waitFor(t, "the second instance to see the signal", func() bool {
				return string(b.get(t, second).State) == `{"seen": ["\"to-second\""]}`
			})
			if in := b.get(t, first); string(in.State) != "{}" || len(in.Inbox) != 0 {
				t.Fatalf("the first instance was reached: state %s, inbox %v", in.State, in.Inbox)
			}
		})
	}
}

func TestCK3_ScopeWithTerminalStatusesReservesKeyUntilGC(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	cfg := fast(ctl)
	cfg.GCRetention = time.Hour
	cfg.GCInterval = 20 * time.Millisecond
	b := setup(t, cfg)
	b.start(t)

	for _, end := range []struct{ signal, key string }{{"finish", "done-key"}, {"fail", "failed-key"}} {
		id := b.insert(t, ctl.With(ctlState{}), &durable.InsertOpts{CorrelationKey: end.key, CorrelationScope: scopeKeepDoneFailed})
		b.waitStatus(t, id, durable.StatusAwaitingSignal)
		b.signal(t, durable.ByKey(end.key), end.signal, nil, "")
		waitFor(t, "the instance to end", func() bool { return b.get(t, id).Status.Terminal() })

		_, err := b.client.Insert(ctxT(t), ctl.With(ctlState{}), &durable.InsertOpts{CorrelationKey: end.key})
		wantDuplicate(t, err, end.key, id)
		if err := b.client.Signal(ctxT(t), durable.ByKey(end.key), "go", nil, ""); !errors.Is(err, durable.ErrNoTarget) {
			t.Fatalf("Signal to a terminal instance reserving its key: %v, want ErrNoTarget", err)
		}

		// GC frees the key with the row.
		b.exec(t, "UPDATE durable_instance SET finished_at = now() - interval '2 hours' WHERE id = $1", id)
		waitFor(t, "GC to delete the row", func() bool {
			_, err := b.client.Get(ctxT(t), id)
			return errors.Is(err, durable.ErrNotFound)
		})
		b.insert(t, ctl.With(ctlState{}), &durable.InsertOpts{CorrelationKey: end.key})
	}
}

func TestCK3_ScopeLiveAndDoneFreesKeyOnlyAfterFailure(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	b := setup(t, fast(ctl))
	b.start(t)

	done := b.insert(t, ctl.With(ctlState{}), &durable.InsertOpts{CorrelationKey: "a", CorrelationScope: scopeKeepDone})
	failed := b.insert(t, ctl.With(ctlState{}), &durable.InsertOpts{CorrelationKey: "b", CorrelationScope: scopeKeepDone})
	b.waitStatus(t, done, durable.StatusAwaitingSignal)
	b.waitStatus(t, failed, durable.StatusAwaitingSignal)
	b.signal(t, durable.ByKey("a"), "finish", nil, "")
	b.signal(t, durable.ByKey("b"), "fail", nil, "")
	b.waitStatus(t, done, durable.StatusDone)
	b.waitStatus(t, failed, durable.StatusFailed)

	_, err := b.client.Insert(ctxT(t), ctl.With(ctlState{}), &durable.InsertOpts{CorrelationKey: "a", CorrelationScope: scopeKeepDone})
	wantDuplicate(t, err, "a", done)
	b.insert(t, ctl.With(ctlState{}), &durable.InsertOpts{CorrelationKey: "b", CorrelationScope: scopeKeepDone})
}

// The never-reuse recipe must name cancelled too: a scope of live+done+failed
// frees the key of a cancelled instance, so a new instance with the same
// business key starts; adding StatusCancelled keeps it reserved.
func TestCK3_CancelledInstanceKeepsKeyOnlyWithCancelledInScope(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	b := setup(t, fast(ctl))
	b.start(t)

	keepCancelled := append(slices.Clone(scopeKeepDoneFailed), durable.StatusCancelled)
	for _, tc := range []struct {
		key      string
		scope    []durable.Status
		reserved bool
	}{
		{key: "live-done-failed", scope: scopeKeepDoneFailed, reserved: false},
		{key: "live-done-failed-cancelled", scope: keepCancelled, reserved: true},
	} {
		id := b.insert(t, ctl.With(ctlState{}), &durable.InsertOpts{CorrelationKey: tc.key, CorrelationScope: tc.scope})
		b.waitStatus(t, id, durable.StatusAwaitingSignal)
		if err := b.client.Cancel(ctxT(t), durable.ByKey(tc.key), "no longer wanted"); err != nil {
			t.Fatalf("Cancel(%q): %v", tc.key, err)
		}
		if in := b.get(t, id); in.Status != durable.StatusCancelled {
			t.Fatalf("instance %d: status %s, want cancelled", id, in.Status)
		}

		newID, err := b.client.Insert(ctxT(t), ctl.With(ctlState{}), &durable.InsertOpts{CorrelationKey: tc.key, CorrelationScope: tc.scope})
		if tc.reserved {
			wantDuplicate(t, err, tc.key, id)
			continue
		}
		if err != nil {
			t.Fatalf("Insert with the key %q of a cancelled instance outside its scope: %v, want a new instance", tc.key, err)
		}
		if newID == id {
			t.Fatalf("Insert returned the cancelled instance's id %d", id)
		}
	}
}

func TestCK4_SignalToUnoccupiedKeyStoresNothing(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	b := setup(t, nil)
	for _, target := range []durable.Target{durable.ByKey("nobody"), durable.ByID(12345)} {
		if err := b.client.Signal(ctxT(t), target, "go", "early", "d1"); !errors.Is(err, durable.ErrNoTarget) {
			t.Fatalf("Signal(%v): %v, want ErrNoTarget", target, err)
		}
	}
	if n := b.count(t, "SELECT (SELECT count(*) FROM durable_signal) + (SELECT count(*) FROM durable_signal_dedup)"); n != 0 {
		t.Fatalf("%d rows stored for signals to nobody", n)
	}
	id := b.insert(t, ctl.With(ctlState{}), &durable.InsertOpts{CorrelationKey: "nobody"})
	if in := b.get(t, id); len(in.Inbox) != 0 {
		t.Fatalf("new instance starts with inbox %v", in.Inbox)
	}
	// The dedup key of the refused signal was not remembered either.
	b.signal(t, durable.ByKey("nobody"), "go", "now", "d1")
	if in := b.get(t, id); len(in.Inbox) != 1 {
		t.Fatalf("inbox %v, want the one signal", in.Inbox)
	}
}

func TestCK5_ScopeMustBeEmptyOrContainEveryLiveStatus(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	b := setup(t, nil)
	for _, tc := range []struct {
		name             string
		scope            []durable.Status
		missing, unknown []durable.Status
	}{
		{name: "runnable only", scope: []durable.Status{durable.StatusRunnable},
			missing: []durable.Status{durable.StatusExecuting, durable.StatusAwaitingSignal, durable.StatusAwaitingChildren}},
		{name: "without awaiting_children", scope: []durable.Status{durable.StatusRunnable, durable.StatusExecuting, durable.StatusAwaitingSignal},
			missing: []durable.Status{durable.StatusAwaitingChildren}},
		{name: "terminal only", scope: []durable.Status{durable.StatusDone, durable.StatusFailed},
			missing: durable.LiveStatuses()},
		{name: "unknown status", scope: append(durable.LiveStatuses(), "paused"),
			unknown: []durable.Status{"paused"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := b.client.Insert(ctxT(t), ctl.With(ctlState{}), &durable.InsertOpts{CorrelationKey: "k", CorrelationScope: tc.scope})
			var se *durable.ScopeError
			if !errors.As(err, &se) {
				t.Fatalf("Insert with scope %v: %v, want a *ScopeError", tc.scope, err)
			}
			if !slices.Equal(se.Missing, tc.missing) || !slices.Equal(se.Unknown, tc.unknown) {
				t.Fatalf("ScopeError missing %v unknown %v, want %v %v", se.Missing, se.Unknown, tc.missing, tc.unknown)
			}
			_, err = b.client.InsertAll(ctxT(t), []durable.InsertParams{{Args: ctl.With(ctlState{}), Opts: &durable.InsertOpts{CorrelationScope: tc.scope}}})
			if !errors.As(err, &se) {
				t.Fatalf("InsertAll with scope %v: %v, want a *ScopeError", tc.scope, err)
			}
		})
	}
	if n := b.count(t, "SELECT count(*) FROM durable_instance"); n != 0 {
		t.Fatalf("%d rows inserted with rejected scopes", n)
	}
	// The table enforces the rule too, for writers that bypass the client.
	_, err := b.pool.Exec(ctxT(t), `INSERT INTO durable_instance (fsm, fsm_version, step, state, queue, correlation_key, correlation_scope)
		VALUES ('ctl', 1, 'start', '{}', 'default', 'k', '{runnable}')`)
	if err == nil {
		t.Fatal("the table accepted the scope {runnable}")
	}
	// Accepted: empty, live, live plus terminal, in any order, with repeats.
	for _, scope := range [][]durable.Status{{}, durable.LiveStatuses(), scopeKeepDoneFailed,
		append([]durable.Status{durable.StatusFailed}, append(durable.LiveStatuses(), durable.StatusRunnable)...)} {
		if _, err := b.client.Insert(ctxT(t), ctl.With(ctlState{}), &durable.InsertOpts{CorrelationScope: scope}); err != nil {
			t.Fatalf("Insert with scope %v: %v", scope, err)
		}
	}
}

func TestEmptyScopeKeyIsAnAddressWithoutUniqueness(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	b := setup(t, nil)
	none := []durable.Status{}
	first := b.insert(t, ctl.With(ctlState{}), &durable.InsertOpts{CorrelationKey: "addr", CorrelationScope: none})
	b.signal(t, durable.ByKey("addr"), "go", nil, "")
	if in := b.get(t, first); len(in.Inbox) != 1 {
		t.Fatalf("inbox %v, want the signal", in.Inbox)
	}
	b.insert(t, ctl.With(ctlState{}), &durable.InsertOpts{CorrelationKey: "addr", CorrelationScope: none})
	if err := b.client.Signal(ctxT(t), durable.ByKey("addr"), "go", nil, ""); !errors.Is(err, durable.ErrAmbiguousTarget) {
		t.Fatalf("Signal to a key two instances carry: %v, want ErrAmbiguousTarget", err)
	}
}

func TestCK6_InsertAllDropsDuplicates(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	b := setup(t, nil)
	existing := b.insert(t, ctl.With(ctlState{}), &durable.InsertOpts{CorrelationKey: "k3"})

	p := func(key string) durable.InsertParams {
		return durable.InsertParams{Args: ctl.With(ctlState{}), Opts: &durable.InsertOpts{CorrelationKey: key}}
	}
	res, err := b.client.InsertAll(ctxT(t), []durable.InsertParams{p("k2"), p("k1"), p("k3"), p("k2"), p(""), p("")})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 6 {
		t.Fatalf("%d results, want 6", len(res))
	}
	for i, want := range []bool{false, false, true, true, false, false} {
		if res[i].Duplicate != want || res[i].ID == 0 {
			t.Fatalf("result %d = %+v, want Duplicate %v and an id", i, res[i], want)
		}
	}
	if res[2].ID != existing {
		t.Fatalf("duplicate of an existing row reports id %d, want %d", res[2].ID, existing)
	}
	if res[3].ID != res[0].ID {
		t.Fatalf("duplicate within the batch reports id %d, want the first's %d", res[3].ID, res[0].ID)
	}
	if n := b.count(t, "SELECT count(*) FROM durable_instance"); n != 5 {
		t.Fatalf("%d rows, want 5", n)
	}
	for _, r := range res {
		if in := b.get(t, r.ID); in.FSM != "ctl" || in.Step != "start" || in.Status != durable.StatusRunnable {
			t.Fatalf("instance %+v", in)
		}
	}
}

func TestCK6_InsertAllOppositeOrdersNeverDeadlock(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	b := setup(t, nil)
	const rounds, keys = 40, 30
	for round := range rounds {
		var forward []durable.InsertParams
		for k := range keys {
			forward = append(forward, durable.InsertParams{Args: ctl.With(ctlState{}),
				Opts: &durable.InsertOpts{CorrelationKey: fmt.Sprintf("r%d-k%02d", round, k)}})
		}
		backward := slices.Clone(forward)
		slices.Reverse(backward)

		var (
			wg      sync.WaitGroup
			ready   = make(chan struct{})
			results [2][]durable.InsertResult
			errs    [2]error
		)
		for i, batch := range [][]durable.InsertParams{forward, backward} {
			wg.Go(func() {
				<-ready
				errs[i] = pgx.BeginFunc(ctxT(t), b.pool, func(tx pgx.Tx) error {
					var err error
					results[i], err = b.client.InsertAllTx(ctxT(t), tx, batch)
					return err
				})
			})
		}
		close(ready)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d, batch %d: %v", round, i, err)
			}
		}
		// Each key went in once; the other batch reports the same id.
		for k := range keys {
			f, r := results[0][k], results[1][keys-1-k]
			if f.Duplicate == r.Duplicate || f.ID != r.ID {
				t.Fatalf("round %d key %d: %+v and %+v", round, k, f, r)
			}
		}
	}
	if n := b.count(t, "SELECT count(*) FROM durable_instance"); n != rounds*keys {
		t.Fatalf("%d rows, want %d", n, rounds*keys)
	}
}

func TestCK7_ConcurrentInsertsOfOneKeyElectOne(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	b := setup(t, nil)
	const n = 32
	var (
		wg    sync.WaitGroup
		ready = make(chan struct{})
		ids   [n]int64
		errs  [n]error
	)
	for i := range n {
		wg.Go(func() {
			<-ready
			ids[i], errs[i] = b.client.Insert(context.Background(), ctl.With(ctlState{}), &durable.InsertOpts{CorrelationKey: "one"})
		})
	}
	close(ready)
	wg.Wait()
	var winner int64
	for i := range n {
		if errs[i] == nil {
			if winner != 0 {
				t.Fatalf("two inserts of one key succeeded: %d and %d", winner, ids[i])
			}
			winner = ids[i]
		}
	}
	if winner == 0 {
		t.Fatal("no insert succeeded")
	}
	for i := range n {
		if errs[i] != nil {
			wantDuplicate(t, errs[i], "one", winner)
		}
	}
	if c := b.count(t, "SELECT count(*) FROM durable_instance"); c != 1 {
		t.Fatalf("%d rows, want 1", c)
	}
}
