package durable_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem/durable"
)

// pausePoint holds the first statement whose SQL is sql, once it has
// returned, until resume is closed; reached receives its backend's pid.
// With skip n, it holds the (n+1)th instead.
type pausePoint struct {
	sql     string
	skip    atomic.Int32
	reached chan uint32
	resume  chan struct{}
}

func newPausePoint(sql string) *pausePoint {
	return &pausePoint{sql: sql, reached: make(chan uint32, 1), resume: make(chan struct{})}
}

// pauseTracer pauses the statements of its points, each once.
type pauseTracer struct{ points []*pausePoint }

type tracedSQL struct{}

func (tr *pauseTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	return context.WithValue(ctx, tracedSQL{}, data.SQL)
}

func (tr *pauseTracer) TraceQueryEnd(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryEndData) {
	sql, _ := ctx.Value(tracedSQL{}).(string)
	for _, p := range tr.points {
		if sql != p.sql || data.Err != nil || p.skip.Add(-1) >= 0 {
			continue
		}
		select {
		case p.reached <- conn.PgConn().PID():
			<-p.resume
		default: // paused once already
		}
	}
}

// Cancel by key locks the parent of the instance occupying the key before
// the instance, as every transaction that locks both does. The key may
// change hands between the look-up of the instance and its lock: a root
// instance held it, none of whose parent was locked, and a child took it
// since. Cancel must then look the key up again and lock the child's
// parent before the child: holding the child while it waits for the
// parent, which a concurrent Cancel of the parent holds while it waits for
// the child, PostgreSQL would fail one of the two with a deadlock.
func TestCancelByKeyThatChangesHandsBetweenItsLookUps(t *testing.T) {
	t.Parallel()
	const key = "order:7"
	ctl := ctlFSM(t)
	spawn := make(chan struct{})
	parent := mustFSM(t, durable.FSMConfig[struct{}]{
		Name: "parent", Initial: "spawn",
		Steps: map[string]durable.StepFunc[struct{}]{
			"spawn": func(ctx context.Context, _ *durable.Step[struct{}]) (durable.Outcome, error) {
				select {
				case <-spawn:
				case <-ctx.Done():
					return durable.Outcome{}, ctx.Err()
				}
				return durable.Children("after", durable.InsertParams{
					Args: ctl.With(ctlState{}), Opts: &durable.InsertOpts{CorrelationKey: key},
				}), nil
			},
			// Never done by itself: once Cancel by key has cancelled its
			// child, the parent runs again, and would otherwise end
			// before the Cancel of the parent reaches it.
			"after": func(ctx context.Context, _ *durable.Step[struct{}]) (durable.Outcome, error) {
				<-ctx.Done()
				return durable.Outcome{}, ctx.Err()
			},
		},
	})
	b := setup(t, fast(parent, ctl))
	b.start(t)
	pid := b.insert(t, parent.With(struct{}{}), nil)
	b.waitStatus(t, pid, durable.StatusExecuting)
	old := b.insert(t, ctl.With(ctlState{}), &durable.InsertOpts{CorrelationKey: key})
	b.waitStatus(t, old, durable.StatusAwaitingSignal)

	// The first lock is that of the instance first found, which has
	// ended by then; the second, the child's.
	keyLooked, childLocked := newPausePoint(durable.LookupByKeySQL), newPausePoint(durable.LockHolderSQL)
	childLocked.skip.Store(1)
	closeAtCleanup(t, keyLooked.resume)
	closeAtCleanup(t, childLocked.resume)
	tr := &pauseTracer{points: []*pausePoint{keyLooked, childLocked}}
	canceller := newClient(t, testPool(t, b.url, func(pc *pgxpool.Config) { pc.ConnConfig.Tracer = tr }), nil, &recorder{})
	byKey := make(chan error, 1)
	go func() { byKey <- canceller.Cancel(context.Background(), durable.ByKey(key), "by key") }()

	// Cancel by key has found the key's instance. The key changes hands:
	// that instance ends, and a child of pid takes it.
	<-keyLooked.reached
	if err := b.client.Cancel(ctxT(t), durable.ByID(old), ""); err != nil {
		t.Fatal(err)
	}
	close(spawn)
	b.waitStatus(t, pid, durable.StatusAwaitingChildren)
	var cid int64
	if err := b.pool.QueryRow(ctxT(t), "SELECT id FROM durable_instance WHERE parent_id = $1", pid).Scan(&cid); err != nil {
		t.Fatal(err)
	}
	b.waitStatus(t, cid, durable.StatusAwaitingSignal)

	// Cancel by key finds the child and locks it, its parent first;
	// meanwhile the parent is cancelled, which waits for their locks.
	close(keyLooked.resume)
	var byKeyPID uint32
	select {
	case byKeyPID = <-childLocked.reached:
	case err := <-byKey:
		t.Fatalf("Cancel by key returned %v before it looked the key up again", err)
	}
	byID := make(chan error, 1)
	go func() { byID <- b.client.Cancel(context.Background(), durable.ByID(pid), "by id") }()
	waitFor(t, "the parent's Cancel to wait for the locks Cancel by key holds", func() bool {
		return b.count(t, "SELECT count(*) FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))", byKeyPID) > 0
	})
	close(childLocked.resume)

	errByKey, errByID := <-byKey, <-byID
	// Either went first: the other then finds the child cancelled (by key:
	// no live instance occupies the key).
	if errByKey != nil && !errors.Is(errByKey, durable.ErrNoTarget) {
		t.Errorf("Cancel by key: %v", errByKey)
	}
	if errByID != nil {
		t.Errorf("Cancel of the parent: %v", errByID)
	}
	for _, id := range []int64{pid, cid} {
		if in := b.get(t, id); in.Status != durable.StatusCancelled {
			t.Errorf("instance %d is %s, want cancelled", id, in.Status)
		}
	}
}
