package durable

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem/internal/pgtest"
)

// records is a slog.Handler that keeps the records it is given.
type records struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *records) WithGroup(string) slog.Handler            { return r }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec.Clone())
	return nil
}

// at returns the messages logged at level.
func (r *records) at(level slog.Level) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, rec := range r.recs {
		if rec.Level == level {
			out = append(out, rec.Message)
		}
	}
	return out
}

// slowBeats makes each heartbeat statement of a pool take delay (or, with
// hang set, until its context ends), as a database under load would.
type slowBeats struct {
	delay time.Duration
	hang  bool
}

func (s *slowBeats) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if data.SQL != heartbeatSQL {
		return ctx
	}
	var wait <-chan time.Time
	if !s.hang {
		wait = time.After(s.delay)
	}
	select {
	case <-ctx.Done():
	case <-wait:
	}
	return ctx
}

func (*slowBeats) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// beatSetup is an engine, not started, that holds two claims of queue
// "q", with its log records, and a pool on its schema whose heartbeats
// beats slows down.
type beatSetup struct {
	ctx    context.Context
	pool   *pgxpool.Pool
	e      *engine
	claims []*claimed
	logs   *records
}

func newBeatSetup(t *testing.T, beats *slowBeats) beatSetup {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	pc, err := pgxpool.ParseConfig(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	pc.ConnConfig.Tracer = beats
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	logs := &records{}
	c, err := NewClient(pool, &Config{LeaseTTL: 3 * time.Second, HeartbeatInterval: time.Second, Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	noop := func(context.Context, *Step[struct{}]) (Outcome, error) { return Done(nil), nil }
	fsm, err := NewFSM(FSMConfig[struct{}]{Name: "beat", Initial: "a", Steps: map[string]StepFunc[struct{}]{"a": noop}})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := c.Insert(ctx, fsm.With(struct{}{}), &InsertOpts{Queue: "q"}); err != nil {
			t.Fatal(err)
		}
	}
	e := &engine{c: c, owner: "owner", held: map[*claimed]struct{}{}, bgCtx: context.Background()}
	at := time.Now()
	cs, err := claim(ctx, pool, "q", 2, e.owner, c.cfg.LeaseTTL)
	if err != nil || len(cs) != 2 {
		t.Fatalf("claim = %d rows, %v; want 2", len(cs), err)
	}
	for _, cl := range cs {
		cl.leased(at, c.cfg.LeaseTTL)
	}
	e.track(cs)
	return beatSetup{ctx, pool, e, cs, logs}
}

// A beat sent when one lease is about to lapse (its row locked by a
// caller's transaction, which the heartbeat skips, so that no beat
// extended it) is not cut short by that lapse: it extends the other
// leases, and logs no error.
func TestHeartbeatNearALapsingLeaseExtendsTheOthers(t *testing.T) {
	t.Parallel()
	s := newBeatSetup(t, &slowBeats{delay: 50 * time.Millisecond})
	lapsing, other := s.claims[0], s.claims[1]
	tx, err := s.pool.Begin(s.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(s.ctx) }()
	if _, err := tx.Exec(s.ctx, `SELECT 1 FROM durable_instance WHERE id = $1 FOR NO KEY UPDATE`, lapsing.id); err != nil {
		t.Fatal(err)
	}
	// The lapsing claim's lease ends well before the beat can finish; the
	// other's, a beat's time later.
	lapsing.leaseEnd.Store(monoNow() + int64(20*time.Millisecond))
	other.leaseEnd.Store(monoNow() + int64(s.e.c.cfg.HeartbeatInterval))
	before := other.leaseEnd.Load()

	s.e.beat()

	if errs := s.logs.at(slog.LevelError); len(errs) > 0 {
		t.Errorf("the beat logged errors: %q", errs)
	}
	if other.leaseEnd.Load() <= before {
		t.Error("the beat did not extend the other claim's lease")
	}
	if lapsing.lost.Load() || other.lost.Load() {
		t.Error("a claim still held was marked lost")
	}
}

// A beat that cannot finish before its deadline, when a lease may lapse,
// is logged as a warning, not as an error; a beat that fails otherwise
// (here, on a closed pool) is logged as an error.
func TestHeartbeatFailureLogLevels(t *testing.T) {
	t.Parallel()
	t.Run("Deadline", func(t *testing.T) {
		t.Parallel()
		s := newBeatSetup(t, &slowBeats{hang: true})
		s.e.beat()
		if errs := s.logs.at(slog.LevelError); len(errs) > 0 {
			t.Errorf("a beat that ran out of time logged errors: %q", errs)
		}
		if warns := s.logs.at(slog.LevelWarn); len(warns) != 1 {
			t.Errorf("a beat that ran out of time logged warnings %q, want one", warns)
		}
	})
	t.Run("ClosedPool", func(t *testing.T) {
		t.Parallel()
		s := newBeatSetup(t, &slowBeats{})
		s.pool.Close()
		s.e.beat()
		if errs := s.logs.at(slog.LevelError); len(errs) != 1 {
			t.Errorf("a beat on a closed pool logged errors %q, want one", errs)
		}
	})
}
