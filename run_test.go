package idem_test

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
	"github.com/idemgo/idem/store/memstore"
)

// settleSpy wraps a store, counts its settle calls and fails Commit with
// commitErr when set.
type settleSpy struct {
	idem.Store
	commitErr          error
	commits, releases  int
	commitHadDeadline  bool
	releaseHadDeadline bool
}

func (s *settleSpy) Commit(ctx context.Context, key idem.Key, lease idem.Lease, result []byte) error {
	s.commits++
	_, s.commitHadDeadline = ctx.Deadline()
	if s.commitErr != nil {
		return s.commitErr
	}
	return s.Store.Commit(ctx, key, lease, result)
}

func (s *settleSpy) FailTransient(ctx context.Context, key idem.Key, lease idem.Lease) error {
	s.releases++
	_, s.releaseHadDeadline = ctx.Deadline()
	return s.Store.FailTransient(ctx, key, lease)
}

// owned begins key on s and returns an Owner of the Fresh reservation.
func owned(t *testing.T, s idem.Store, key idem.Key) idem.Owner {
	t.Helper()
	o, err := s.Begin(context.Background(), key, mustRequest(t, `"req"`), nil)
	if err != nil || o.Kind != idem.Fresh {
		t.Fatalf("Begin = %+v, %v", o, err)
	}
	return idem.Owner{Store: s, Key: key, Lease: o.Lease}
}

func TestOwnerRun(t *testing.T) {
	unavailable := errors.New("store down")
	for name, c := range map[string]struct {
		result    []byte
		record    bool
		commitErr error
		// want
		recorded          bool
		commits, releases int
		err               error
		replay            bool // a later Begin replays the result
	}{
		"recorded":     {result: []byte(`{"ok":true}`), record: true, recorded: true, commits: 1, replay: true},
		"released":     {record: false, releases: 1},
		"commit fails": {result: []byte(`1`), record: true, commitErr: unavailable, commits: 1, releases: 1, err: unavailable},
		"commit stale": {result: []byte(`1`), record: true, commitErr: idem.ErrStaleToken, commits: 1, err: idem.ErrStaleToken},
	} {
		t.Run(name, func(t *testing.T) {
			spy := &settleSpy{Store: newMem(t, nil), commitErr: c.commitErr}
			k := testKey(t, "owner")
			o := owned(t, spy, k)
			o.SettleTimeout, o.Timed = time.Minute, true
			o.Run(context.Background(), func(context.Context) ([]byte, bool) { return c.result, c.record })
			if o.Recorded != c.recorded || !errors.Is(o.Err, c.err) || (c.err == nil) != (o.Err == nil) {
				t.Errorf("Recorded %v Err %v, want %v %v", o.Recorded, o.Err, c.recorded, c.err)
			}
			if spy.commits != c.commits || spy.releases != c.releases {
				t.Errorf("%d commits %d releases, want %d %d", spy.commits, spy.releases, c.commits, c.releases)
			}
			if spy.commits > 0 && !spy.commitHadDeadline || spy.releases > 0 && !spy.releaseHadDeadline {
				t.Error("a settle call ran without SettleTimeout's deadline")
			}
			if o.SettleTime <= 0 {
				t.Errorf("SettleTime = %v, want the time of the settle calls", o.SettleTime)
			}
			b, err := spy.Begin(context.Background(), k, mustRequest(t, `"req"`), nil)
			switch {
			case err != nil:
				t.Fatal(err)
			case c.replay && (b.Kind != idem.PriorResult || string(b.Result) != string(c.result)):
				t.Errorf("Begin after Run = %v %s, want the result replayed", b.Kind, b.Result)
			case !c.replay && c.commitErr != idem.ErrStaleToken && b.Kind != idem.Fresh:
				t.Errorf("Begin after Run = %v, want Fresh (the key released)", b.Kind)
			case c.commitErr == idem.ErrStaleToken && b.Kind != idem.InFlight:
				t.Errorf("Begin after a stale Commit = %v, want InFlight (not released by a stale owner)", b.Kind)
			}
		})
	}
}

func TestOwnerPanicReleases(t *testing.T) {
	spy := &settleSpy{Store: newMem(t, nil)}
	k := testKey(t, "panic")
	o := owned(t, spy, k)
	func() {
		defer func() {
			if p := recover(); p != "kaboom" {
				t.Fatalf("recovered %v, want the work's panic", p)
			}
		}()
		o.Run(context.Background(), func(context.Context) ([]byte, bool) { panic("kaboom") })
	}()
	if spy.commits != 0 || spy.releases != 1 || o.Recorded {
		t.Errorf("%d commits %d releases, recorded %v; want the key released only", spy.commits, spy.releases, o.Recorded)
	}
	if _, err := spy.Get(context.Background(), k); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("after a panic the key is still held: %v", err)
	}
}

func TestOwnerLeaseLostCancelsWork(t *testing.T) {
	clock := idemtest.NewClock()
	s, err := memstore.New(memstore.Config{Now: clock.Now, Lease: 30 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	k := testKey(t, "lost")
	o := owned(t, s, k)
	o.Run(context.Background(), func(ctx context.Context) ([]byte, bool) {
		clock.Advance(time.Second) // the lease lapses: a retry takes the key over
		if b, err := s.Begin(context.Background(), k, mustRequest(t, `"req"`), nil); err != nil || !b.TakenOver {
			t.Fatalf("takeover = %+v, %v", b, err)
		}
		<-ctx.Done() // at the next heartbeat
		if !errors.Is(context.Cause(ctx), idem.ErrLeaseLost) {
			t.Errorf("cause = %v, want ErrLeaseLost", context.Cause(ctx))
		}
		return []byte(`1`), true
	})
	if o.Recorded || !errors.Is(o.Err, idem.ErrStaleToken) {
		t.Errorf("Recorded %v Err %v after losing the lease, want ErrStaleToken", o.Recorded, o.Err)
	}
}

// panickyCommit is a store whose Commit calls during, then panics.
type panickyCommit struct {
	idem.Store
	during func()
}

func (s panickyCommit) Commit(context.Context, idem.Key, idem.Lease, []byte) error {
	s.during()
	panic("commit failed")
}

// A panic in the store's Commit comes after the run's lease keeper went
// back to the pool, where another run may have taken it: the panic must
// not stop that keeper again.
func TestOwnerPanicInCommitLeavesOtherRunsKeeperAlone(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1)) // one P: the pool hands the keeper straight on
	s := newHeartbeatWatch(t)
	s.extend = time.Second // a loaded machine delaying beats loses no lease
	ctx := context.Background()
	begin := func(k idem.Key) idem.Outcome {
		req, _ := idem.NewRequest([]byte(`{}`))
		o, err := s.Begin(ctx, k, req, &idem.BeginOpts{Lease: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		o.Lease.TTL = 60 * time.Millisecond // to the keeper: a beat every 20 ms
		return o
	}
	other := testKey(t, "other")
	s.set(other, true)
	s.set(testKey(t, "panics"), true)
	running, checked, otherDone := make(chan struct{}), make(chan struct{}), make(chan bool, 1)
	startOther := func() {
		o := idem.Owner{Store: s, Key: other, Lease: begin(other).Lease}
		go func() {
			o.Run(ctx, func(ctx context.Context) ([]byte, bool) {
				close(running)
				select {
				case <-checked:
				case <-ctx.Done():
				}
				return []byte(`1`), true
			})
			otherDone <- o.Recorded
		}()
		<-running
	}
	k := testKey(t, "panics")
	func() {
		defer func() {
			if p := recover(); p != "commit failed" {
				t.Errorf("Run panicked with %v, want the store's panic", p)
			}
		}()
		o := idem.Owner{Store: panickyCommit{s, startOther}, Key: k, Lease: begin(k).Lease}
		o.Run(ctx, func(context.Context) ([]byte, bool) { return []byte(`2`), true })
	}()
	waitBeats(t, s, other, 5)
	o := begin(other)
	close(checked)
	if o.Kind != idem.InFlight {
		t.Errorf("Begin of the other, running key = %v; want in_flight (its lease kept)", o.Kind)
	}
	if !<-otherDone {
		t.Error("the other run's result was not recorded")
	}
}

// Work that leaves by runtime.Goexit (t.FailNow does) releases the key,
// as a panic does.
func TestOwnerGoexitReleases(t *testing.T) {
	s := newMem(t, nil)
	k := testKey(t, "goexit")
	req, _ := idem.NewRequest([]byte(`{}`))
	o, err := s.Begin(context.Background(), k, req, nil)
	if err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		(&idem.Owner{Store: s, Key: k, Lease: o.Lease}).Run(context.Background(), func(context.Context) ([]byte, bool) {
			runtime.Goexit()
			return nil, false
		})
	}()
	<-exited
	if o, err := s.Begin(context.Background(), k, req, nil); err != nil || o.Kind != idem.Fresh {
		t.Fatalf("Begin after the work exited = %v, %v; want fresh", o.Kind, err)
	}
}
