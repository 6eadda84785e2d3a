package durable_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem/durable"
	"github.com/idemgo/idem/internal/pgtest"
)

// These tests pin that the outcome of a step that has run is committed
// once, though the connection the commit goes out on fails: the commit is
// made again while the lease is the engine's, instead of leaving the row
// to the reaper and the step to run again.

// onceFSM is an FSM of one step, "work", that calls run and ends the
// instance done.
func onceFSM(t testing.TB, run func(ctx context.Context)) *durable.FSM[faultState] {
	return mustFSM(t, durable.FSMConfig[faultState]{
		Name: "once", Initial: "work",
		Steps: map[string]durable.StepFunc[faultState]{
			"work": func(ctx context.Context, s *durable.Step[faultState]) (durable.Outcome, error) {
				run(ctx)
				return durable.Done("ran"), nil
			},
		},
	})
}

// onceConfig runs def on one worker with no prefetch, so that the picker
// sends nothing while the step runs, and without the wake-up listener, so
// that no connection but the commit's is used then but the heartbeat's.
func onceConfig(def durable.Definition, lease time.Duration) *durable.Config {
	cfg := fast(def)
	cfg.Queues = map[string]durable.QueueConfig{durable.DefaultQueue: {Concurrency: 1}}
	cfg.PollOnly = true
	cfg.LeaseTTL = lease
	cfg.HeartbeatInterval = lease / 4
	cfg.ReaperInterval = 20 * time.Millisecond
	return cfg
}

// onlyStepEvent waits for the instance's StepStop events to be reported
// and returns the only one, failing t if there is another.
func onlyStepEvent(t *testing.T, rec *recorder, id int64) durable.StepStopEvent {
	t.Helper()
	var got []durable.StepStopEvent
	waitFor(t, "the step's StepStop event", func() bool {
		got = got[:0]
		for _, e := range rec.stepEvents() {
			if e.ID == id {
				got = append(got, e)
			}
		}
		return len(got) > 0
	})
	if len(got) != 1 {
		t.Fatalf("StepStop events of the instance: %+v; want one", got)
	}
	return got[0]
}

func TestStepWhosePoolsConnectionsDropIsCommittedOnce(t *testing.T) {
	t.Parallel()
	pool, drop := pgtest.DroppablePool(t)
	app := pool.Config().ConnConfig.RuntimeParams["application_name"]
	// The test's own pool, on the same schema, whose connections are
	// not dropped.
	observer := newPool(t, pool.Config().ConnConfig.ConnString())

	var runs atomic.Int32
	fsm := onceFSM(t, func(ctx context.Context) {
		if runs.Add(1) > 1 {
			return
		}
		// The step's effect has happened; the server now ends every
		// connection of the engine's pool, as a failover would, and the
		// step returns once their backends have exited.
		var pids []int32
		if err := observer.QueryRow(ctx, `SELECT coalesce(array_agg(pid), '{}') FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&pids); err != nil {
			t.Error(err)
		}
		if n := drop(); n == 0 {
			t.Error("drop ended no connection of the engine's pool")
		}
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			var n int
			err := observer.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1)`, pids).Scan(&n)
			if err == nil && n == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("the pool's backends did not exit: %d left (%v)", n, err)
				break
			}
		}
	})
	rec := &recorder{}
	// The engine's own statements (the await timer's, the reaper's, the
	// heartbeat's) are rare, so that they seldom take the dropped
	// connections out of the pool before the commit does.
	cfg := onceConfig(fsm, time.Second)
	cfg.PollInterval = time.Second
	cfg.ReaperInterval = 250 * time.Millisecond
	client := newClient(t, pool, cfg, rec)
	if err := client.Migrate(ctxT(t)); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	id, err := client.Insert(ctxT(t), fsm.With(faultState{}), nil)
	if err != nil {
		t.Fatalf("Insert: %v", err)
	}
	startClient(t, client)

	in, err := newClient(t, observer, nil, &recorder{}).Wait(ctxT(t), id)
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if in.Status != durable.StatusDone {
		t.Fatalf("status %s; want done", in.Status)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("the step ran %d times; want once: its commit, on a dropped connection, was not made again", n)
	}
	if e := onlyStepEvent(t, rec, id); e.CommitErr != nil || e.Fenced {
		t.Errorf("StepStop: CommitErr %v, Fenced %v; want the outcome committed", e.CommitErr, e.Fenced)
	}
}

// readyForQuery is the server's ReadyForQuery message, outside a
// transaction: the last of its reply to a query, sent once the query's
// implicit transaction has committed.
var readyForQuery = []byte{'Z', 0, 0, 0, 5, 'I'}

// failingConn is a connection of a pool that fails once, at the first
// statement sent by any connection of the pool whose text holds marker:
// with sendFirst, once the statement has run, its reply read and dropped,
// as a reply lost when a connection fails after the server committed;
// without, sending nothing, after calling before. A statement new to a
// connection is prepared first (pgx's statement cache): its text goes out
// in the prepare's write (Parse), and the statement runs at the next
// write that binds (Bind).
type failingConn struct {
	net.Conn
	marker    []byte
	armed     *atomic.Bool // shared by the pool's connections: one failure in all
	sendFirst bool
	before    func()
	prepared  atomic.Bool // the marked statement was prepared: it runs at the next Bind
	failing   atomic.Bool // the marked statement was sent to run: its reply is dropped
}

func (c *failingConn) Write(p []byte) (int, error) {
	switch {
	case c.prepared.Load() && len(p) > 0 && p[0] == 'B':
		c.prepared.Store(false)
		c.failing.Store(true)
	case !bytes.Contains(p, c.marker) || !c.armed.CompareAndSwap(true, false):
	case c.sendFirst:
		c.prepared.Store(true)
	default:
		if c.before != nil {
			c.before()
		}
		c.Conn.Close()
		return 0, &net.OpError{Op: "write", Net: "tcp", Err: errors.New("connection reset by peer (test)")}
	}
	return c.Conn.Write(p)
}

func (c *failingConn) Read(p []byte) (int, error) {
	if !c.failing.Load() {
		return c.Conn.Read(p)
	}
	// The reply ends with ReadyForQuery, once the statement's implicit
	// transaction has committed.
	var reply []byte
	buf := make([]byte, 4096)
	for !bytes.Contains(reply, readyForQuery) {
		n, err := c.Conn.Read(buf)
		reply = append(reply, buf[:n]...)
		if err != nil {
			break
		}
	}
	c.failing.Store(false)
	c.Conn.Close()
	return 0, &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer (test)")}
}

// failingPool is a pool on url whose connections are failingConns with
// marker, sendFirst and before, armed by arm.
func failingPool(t *testing.T, url string, marker string, sendFirst bool, before func()) (pool *pgxpool.Pool, arm func()) {
	armed := &atomic.Bool{}
	pool = testPool(t, url, func(pc *pgxpool.Config) {
		dial := pc.ConnConfig.DialFunc
		pc.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &failingConn{Conn: conn, marker: []byte(marker), armed: armed, sendFirst: sendFirst, before: before}, nil
		}
	})
	return pool, func() { armed.Store(true) }
}

// endMarker is in the statement that ends an instance: Done's commit.
const endMarker = "finished_at = now()"

func TestStepWhoseCommitsReplyIsLostIsReportedCommitted(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	pool, arm := failingPool(t, b.url, endMarker, true, nil)
	var runs atomic.Int32
	fsm := onceFSM(t, func(context.Context) {
		runs.Add(1)
		arm()
	})
	rec := &recorder{}
	client := newClient(t, pool, onceConfig(fsm, 10*time.Second), rec)
	id := b.insert(t, fsm.With(faultState{}), nil)
	startClient(t, client)

	in, err := client.Wait(ctxT(t), id)
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if in.Status != durable.StatusDone {
		t.Fatalf("status %s; want done", in.Status)
	}
	// The commit was applied though its reply was lost: the repeat found
	// the row moved on, and that is the step's own commit, not a lost
	// lease.
	if e := onlyStepEvent(t, rec, id); e.CommitErr != nil || e.Fenced {
		t.Errorf("StepStop: CommitErr %v, Fenced %v; want the outcome committed", e.CommitErr, e.Fenced)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("the step ran %d times; want once", n)
	}
}

func TestStepCancelledWhileItsCommitIsMadeAgainIsFencedAndFreesItsLease(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	var id int64
	// Before the commit's first write fails, sending nothing, the instance
	// is cancelled: its row keeps the step's lease, and the commit made
	// again is fenced off.
	cancelIt := func() {
		if err := b.client.Cancel(context.Background(), durable.ByID(id), "cancelled meanwhile"); err != nil {
			t.Errorf("Cancel: %v", err)
		}
	}
	pool, arm := failingPool(t, b.url, endMarker, false, cancelIt)
	var runs atomic.Int32
	fsm := onceFSM(t, func(context.Context) {
		runs.Add(1)
		arm()
	})
	rec := &recorder{}
	// A lease longer than waitFor waits: only the engine, not the
	// reaper, can have cleared it in time.
	client := newClient(t, pool, onceConfig(fsm, time.Minute), rec)
	id = b.insert(t, fsm.With(faultState{}), nil)
	startClient(t, client)

	e := onlyStepEvent(t, rec, id)
	if e.CommitErr != nil || !e.Fenced {
		t.Errorf("StepStop: CommitErr %v, Fenced %v; want the outcome fenced off", e.CommitErr, e.Fenced)
	}
	if in := b.get(t, id); in.Status != durable.StatusCancelled {
		t.Errorf("status %s; want cancelled", in.Status)
	}
	waitFor(t, "the cancelled row's lease to be cleared", func() bool {
		return b.count(t, `SELECT count(*) FROM durable_instance WHERE id = $1 AND lease_owner IS NULL`, id) == 1
	})
	if n := runs.Load(); n != 1 {
		t.Errorf("the step ran %d times; want once", n)
	}
}

func TestStepWhoseCommitTheServerKeepsRefusingIsGivenUpWithItsLease(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	// The server fails every end of an instance with a system error (as a
	// relation's file that cannot be read would), while the heartbeat's
	// statements, which end nothing, succeed and extend the lease.
	b.exec(t, `CREATE FUNCTION fail_end() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'end refused (test)' USING ERRCODE = '58030'; END $$`)
	b.exec(t, `CREATE TRIGGER fail_end BEFORE UPDATE ON durable_instance
FOR EACH ROW WHEN (NEW.status = 'done') EXECUTE FUNCTION fail_end()`)
	fsm := onceFSM(t, func(context.Context) {})
	rec := &recorder{}
	const lease = time.Second
	cfg := onceConfig(fsm, lease)
	client := newClient(t, b.pool, cfg, rec)
	id := b.insert(t, fsm.With(faultState{}), nil)
	startClient(t, client)

	// The commit is made again while the lease it began under lasts, not
	// for as long as the heartbeat extends it: given up, the row is left
	// to the reaper, and the step to run again.
	start := time.Now()
	var e durable.StepStopEvent
	waitFor(t, "the commit to be given up", func() bool {
		for _, e = range rec.stepEvents() {
			if e.ID == id {
				return true
			}
		}
		return false
	})
	if e.CommitErr == nil || e.Fenced {
		t.Errorf("StepStop: CommitErr %v, Fenced %v; want the commit's failure", e.CommitErr, e.Fenced)
	}
	if took := time.Since(start); took > 5*lease {
		t.Errorf("the commit was given up after %v; want within about the lease, %v", took, lease)
	}
}

// TestStepWhoseCommitIsADeadlocksVictimIsCommittedOnce: an outcome commit
// that the server rolls back as a deadlock's victim (or a serialization
// failure), which the same statements can pass when made again, is made
// again under its lease and committed once; the step does not run again.
func TestStepWhoseCommitIsADeadlocksVictimIsCommittedOnce(t *testing.T) {
	t.Parallel()
	for _, code := range []string{"40P01", "40001"} {
		t.Run(code, func(t *testing.T) {
			b := setup(t, nil)
			// The first end of an instance is rolled back as a deadlock's
			// victim; a sequence counts the tries, as it is not rolled back.
			b.exec(t, `CREATE SEQUENCE end_tries`)
			b.exec(t, `CREATE FUNCTION victim_once() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF nextval('end_tries') = 1 THEN
		RAISE EXCEPTION 'rolled back (test)' USING ERRCODE = '`+code+`';
	END IF;
	RETURN NEW;
END $$`)
			b.exec(t, `CREATE TRIGGER victim_once BEFORE UPDATE ON durable_instance
FOR EACH ROW WHEN (NEW.status = 'done') EXECUTE FUNCTION victim_once()`)
			var runs atomic.Int32
			fsm := onceFSM(t, func(context.Context) { runs.Add(1) })
			rec := &recorder{}
			client := newClient(t, b.pool, onceConfig(fsm, time.Second), rec)
			id := b.insert(t, fsm.With(faultState{}), nil)
			startClient(t, client)
			e := onlyStepEvent(t, rec, id)
			if e.CommitErr != nil || e.Fenced {
				t.Errorf("StepStop: CommitErr %v, Fenced %v; want the outcome committed", e.CommitErr, e.Fenced)
			}
			// Done once; left to the reaper, it would be done only after a
			// second run.
			waitFor(t, "the instance to be done", func() bool { return b.get(t, id).Status == durable.StatusDone })
			if n := runs.Load(); n != 1 {
				t.Errorf("the step ran %d times; want once", n)
			}
		})
	}
}
