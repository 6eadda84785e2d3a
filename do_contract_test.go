package idem_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
)

// cancelOnBegin cancels a context right after Begin answered: the caller
// went away while the reservation was being made.
type cancelOnBegin struct {
	idem.Store
	cancel context.CancelFunc
}

func (s *cancelOnBegin) Begin(ctx context.Context, key idem.Key, req idem.Request, opts *idem.BeginOpts) (idem.Outcome, error) {
	o, err := s.Store.Begin(ctx, key, req, opts)
	s.cancel()
	return o, err
}

// TestDoCancellation pins what Do does when ctx is cancelled before,
// during Begin, while fn runs and as fn returns.
func TestDoCancellation(t *testing.T) {
	s := newMem(t, nil)
	bg := context.Background()
	t.Run("before", func(t *testing.T) {
		k := testKey(t, "cancel-before")
		ctx, cancel := context.WithCancel(bg)
		cancel()
		_, err := idem.Do(ctx, s, k, "req", func(context.Context) (int, error) {
			t.Error("fn ran with a cancelled ctx")
			return 1, nil
		}, nil)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Do = %v, want context.Canceled", err)
		}
		if _, err := s.Get(bg, k); !errors.Is(err, idem.ErrNotFound) {
			t.Errorf("record after a cancelled Do: %v, want none", err)
		}
	})
	t.Run("during Begin", func(t *testing.T) {
		k := testKey(t, "cancel-during-begin")
		ctx, cancel := context.WithCancel(bg)
		_, err := idem.Do(ctx, &cancelOnBegin{Store: s, cancel: cancel}, k, "req", func(context.Context) (int, error) {
			t.Error("fn ran although ctx was cancelled before it started")
			return 1, nil
		}, nil)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Do = %v, want context.Canceled", err)
		}
		if _, err := s.Get(bg, k); !errors.Is(err, idem.ErrNotFound) {
			t.Errorf("the reservation after a Do cancelled during Begin: %v, want it released", err)
		}
	})
	t.Run("while running, result returned", func(t *testing.T) {
		k := testKey(t, "cancel-while-running")
		ctx, cancel := context.WithCancel(bg)
		n, err := idem.Do(ctx, s, k, "req", func(ctx context.Context) (int, error) {
			cancel()
			<-ctx.Done() // fn's context follows ctx
			return 7, nil
		}, nil)
		if err != nil || n != 7 {
			t.Fatalf("Do = %d, %v; want 7, nil", n, err)
		}
		if rec, err := s.Get(bg, k); err != nil || rec.Status != idem.StatusCommitted || string(rec.Result) != "7" {
			t.Errorf("record = %+v, %v; want 7 committed", rec, err)
		}
	})
	t.Run("while running, ctx error returned", func(t *testing.T) {
		k := testKey(t, "cancel-while-running-err")
		ctx, cancel := context.WithCancel(bg)
		_, err := idem.Do(ctx, s, k, "req", func(ctx context.Context) (int, error) {
			cancel()
			<-ctx.Done()
			return 0, ctx.Err()
		}, nil)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Do = %v, want context.Canceled", err)
		}
		if _, err := s.Get(bg, k); !errors.Is(err, idem.ErrNotFound) {
			t.Errorf("record after fn gave up: %v, want the key released", err)
		}
	})
}

// failing wraps a store and fails the calls named in fail with an
// unavailable store's error.
type failing struct {
	idem.Store
	fail map[string]bool
}

var errDown = errors.New("connection refused")

func (s *failing) Begin(ctx context.Context, key idem.Key, req idem.Request, opts *idem.BeginOpts) (idem.Outcome, error) {
	if s.fail["Begin"] {
		return idem.Outcome{}, idem.Unavailable(errDown)
	}
	return s.Store.Begin(ctx, key, req, opts)
}

func (s *failing) Commit(ctx context.Context, key idem.Key, lease idem.Lease, result []byte) error {
	if s.fail["Commit"] {
		return idem.Unavailable(errDown)
	}
	return s.Store.Commit(ctx, key, lease, result)
}

func (s *failing) FailPermanent(ctx context.Context, key idem.Key, lease idem.Lease, e idem.StoredError) error {
	if s.fail["FailPermanent"] {
		return idem.Unavailable(errDown)
	}
	return s.Store.FailPermanent(ctx, key, lease, e)
}

func (s *failing) FailTransient(ctx context.Context, key idem.Key, lease idem.Lease) error {
	if s.fail["FailTransient"] {
		return idem.Unavailable(errDown)
	}
	return s.Store.FailTransient(ctx, key, lease)
}

// TestDoStoreFailures pins what Do returns when the store fails at each
// step.
func TestDoStoreFailures(t *testing.T) {
	ctx := context.Background()
	mem := newMem(t, nil)
	boom := errors.New("boom")

	k := testKey(t, "begin-fails")
	_, err := idem.Do(ctx, &failing{mem, map[string]bool{"Begin": true}}, k, "req", func(context.Context) (int, error) {
		t.Error("fn ran although Begin failed")
		return 1, nil
	}, nil)
	if !errors.Is(err, idem.ErrUnavailable) {
		t.Errorf("Do when Begin fails = %v, want ErrUnavailable", err)
	}

	k = testKey(t, "commit-fails")
	n, err := idem.Do(ctx, &failing{mem, map[string]bool{"Commit": true}}, k, "req", func(context.Context) (int, error) { return 3, nil }, nil)
	if n != 3 || !errors.Is(err, idem.ErrUnavailable) || !errors.Is(err, errDown) {
		t.Errorf("Do when Commit fails = %d, %v; want fn's result and ErrUnavailable", n, err)
	}
	if _, err := mem.Get(ctx, k); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("record after a failed Commit: %v, want the key released", err)
	}

	k = testKey(t, "fail-permanent-fails")
	_, err = idem.Do(ctx, &failing{mem, map[string]bool{"FailPermanent": true}}, k, "req", func(context.Context) (int, error) {
		return 0, idem.Permanent("declined", boom)
	}, nil)
	if !errors.Is(err, boom) || !errors.Is(err, idem.ErrUnavailable) {
		t.Errorf("Do when FailPermanent fails = %v, want fn's error and ErrUnavailable", err)
	}
	if _, err := mem.Get(ctx, k); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("record after a failed FailPermanent: %v, want the key released", err)
	}

	k = testKey(t, "release-fails")
	_, err = idem.Do(ctx, &failing{mem, map[string]bool{"FailTransient": true}}, k, "req", func(context.Context) (int, error) { return 0, boom }, nil)
	if !errors.Is(err, boom) || !errors.Is(err, idem.ErrUnavailable) {
		t.Errorf("Do when the release fails = %v, want fn's error and ErrUnavailable", err)
	}
	if rec, err := mem.Get(ctx, k); err != nil || rec.Status != idem.StatusInProgress {
		t.Errorf("record after a failed release: %+v, %v; want it in flight until its lease lapses", rec, err)
	}
}

// TestDoPermanentFailureReplays: a Permanent error is returned as is, then
// replayed to every retry as a *StoredError, without running fn again.
func TestDoPermanentFailureReplays(t *testing.T) {
	ctx := context.Background()
	s := newMem(t, nil)
	k := testKey(t, "permanent")
	declined := errors.New("card declined")
	runs := 0
	fn := func(context.Context) (int, error) { runs++; return 0, idem.Permanent("card.declined", declined) }
	if _, err := idem.Do(ctx, s, k, "req", fn, nil); !errors.Is(err, declined) || !idem.IsPermanent(err) {
		t.Fatalf("first Do = %v, want fn's permanent error", err)
	}
	for range 2 {
		_, err := idem.Do(ctx, s, k, "req", fn, nil)
		var se *idem.StoredError
		if !errors.As(err, &se) || se.Class != "card.declined" || se.Message != "card declined" {
			t.Errorf("retry = %v, want the recorded *StoredError", err)
		}
	}
	if runs != 1 {
		t.Errorf("fn ran %d times, want 1", runs)
	}
}

// TestDoConcurrentCallersRunOnce: of many goroutines calling Do with one
// key while fn runs, exactly one runs fn; every other one gets an
// *InFlightError with a retry hint; afterwards every call replays.
func TestDoConcurrentCallersRunOnce(t *testing.T) {
	const n = 64
	ctx := context.Background()
	s := newMem(t, nil)
	k := testKey(t, "concurrent")
	var runs atomic.Int32
	others := make(chan struct{})
	type answer struct {
		n   int
		err error
	}
	answers := make(chan answer, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			v, err := idem.Do(ctx, s, k, "req", func(context.Context) (int, error) {
				runs.Add(1)
				<-others // run until every other caller has its answer
				return 42, nil
			}, nil)
			answers <- answer{v, err}
		})
	}
	for range n - 1 {
		a := <-answers
		var ife *idem.InFlightError
		if !errors.As(a.err, &ife) || !errors.Is(a.err, idem.ErrInFlight) || ife.RetryAfter <= 0 {
			t.Errorf("a concurrent caller got %d, %v; want an *InFlightError with a retry hint", a.n, a.err)
		}
	}
	close(others)
	if a := <-answers; a.err != nil || a.n != 42 {
		t.Errorf("the runner got %d, %v; want 42", a.n, a.err)
	}
	wg.Wait()
	if got := runs.Load(); got != 1 {
		t.Fatalf("fn ran %d times, want 1", got)
	}
	var replays sync.WaitGroup
	for range n {
		replays.Go(func() {
			v, err := idem.Do(ctx, s, k, "req", func(context.Context) (int, error) { runs.Add(1); return 0, nil }, nil)
			if err != nil || v != 42 {
				t.Errorf("replay = %d, %v; want 42", v, err)
			}
		})
	}
	replays.Wait()
	if got := runs.Load(); got != 1 {
		t.Errorf("fn ran %d times after the replays, want 1", got)
	}
}

// TestDoOutlivesLeaseWithoutHeartbeats: with heartbeats disabled, a run
// that outlives its lease is taken over; its late result is not recorded
// (ErrStaleToken) and the new owner's record stands.
func TestDoOutlivesLeaseWithoutHeartbeats(t *testing.T) {
	clock := idemtest.NewClock()
	s := newMem(t, clock.Now)
	ctx := context.Background()
	k := testKey(t, "outlives")
	var takeover idem.Outcome
	n, err := idem.Do(ctx, s, k, "req", func(context.Context) (int, error) {
		clock.Advance(idem.DefaultLease + time.Second)
		var err error
		takeover, err = s.Begin(ctx, k, mustRequest(t, `"req"`), nil)
		if err != nil || takeover.Kind != idem.Fresh || !takeover.TakenOver {
			t.Errorf("Begin after the lease = %+v, %v; want a takeover", takeover, err)
		}
		return 1, nil
	}, &idem.DoOpts{HeartbeatEvery: -1})
	if n != 1 || !errors.Is(err, idem.ErrStaleToken) {
		t.Errorf("Do that outlived its lease = %d, %v; want fn's result and ErrStaleToken", n, err)
	}
	if err := s.Commit(ctx, k, takeover.Lease, []byte(`2`)); err != nil {
		t.Errorf("the new owner's Commit: %v", err)
	}
}

// unreachableHeartbeats fails every heartbeat as an unreachable store
// does.
type unreachableHeartbeats struct{ idem.Store }

func (unreachableHeartbeats) Heartbeat(context.Context, idem.Key, idem.Lease, time.Duration) (idem.Lease, error) {
	return idem.Lease{}, idem.Unavailable(errDown)
}

// TestDoLeaseLapsesWhileStoreUnreachable: when heartbeats cannot reach
// the store for as long as the lease lasts, the lease has lapsed and
// another process may take the key over: fn's context is cancelled with
// cause ErrLeaseLost, as when a heartbeat finds the key taken over.
func TestDoLeaseLapsesWhileStoreUnreachable(t *testing.T) {
	checkDoLapse(t, func(s idem.Store) idem.Store { return unreachableHeartbeats{s} }, 60*time.Millisecond, 0)
}

// TestOwnerLeaseLapsesWhileStoreUnreachable is the same for Owner.Run.
func TestOwnerLeaseLapsesWhileStoreUnreachable(t *testing.T) {
	checkOwnerLapse(t, func(s idem.Store) idem.Store { return unreachableHeartbeats{s} }, 60*time.Millisecond)
}

// checkDoLapse runs idem.Do on wrap(a memstore) with lease, and checks
// that fn's context is cancelled with cause ErrLeaseLost no sooner than
// the lease lapsed, and within the given time of the start (10 s when 0).
func checkDoLapse(t *testing.T, wrap func(idem.Store) idem.Store, lease, within time.Duration) {
	t.Helper()
	if within == 0 {
		within = 10 * time.Second
	}
	start := time.Now()
	_, err := idem.Do(context.Background(), wrap(newMem(t, nil)), testKey(t, "lapse"), "req", func(ctx context.Context) (int, error) {
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
			t.Error("fn's context still live 10s after its lease lapsed")
			return 0, nil
		}
		switch elapsed := time.Since(start); {
		case elapsed < lease:
			t.Errorf("cancelled after %s, before the lease of %s lapsed", elapsed, lease)
		case elapsed >= within:
			t.Errorf("cancelled after %s, %s after the lease of %s lapsed", elapsed, elapsed-lease, lease)
		}
		if cause := context.Cause(ctx); !errors.Is(cause, idem.ErrLeaseLost) {
			t.Errorf("cause = %v, want ErrLeaseLost", cause)
		}
		return 0, context.Cause(ctx)
	}, &idem.DoOpts{Begin: &idem.BeginOpts{Lease: lease}})
	if !errors.Is(err, idem.ErrLeaseLost) {
		t.Errorf("Do = %v, want ErrLeaseLost", err)
	}
}

// checkOwnerLapse runs an idem.Owner on wrap(a memstore) with lease, and
// checks that work's context is cancelled with cause ErrLeaseLost.
func checkOwnerLapse(t *testing.T, wrap func(idem.Store) idem.Store, lease time.Duration) {
	t.Helper()
	mem := newMem(t, nil)
	k := testKey(t, "owner-lapse")
	o, err := mem.Begin(context.Background(), k, mustRequest(t, `"req"`), &idem.BeginOpts{Lease: lease})
	if err != nil || o.Kind != idem.Fresh {
		t.Fatal(o, err)
	}
	own := idem.Owner{Store: wrap(mem), Key: k, Lease: o.Lease}
	own.Run(context.Background(), func(ctx context.Context) ([]byte, bool) {
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
			t.Error("work's context still live 10s after its lease lapsed")
		}
		if cause := context.Cause(ctx); !errors.Is(cause, idem.ErrLeaseLost) {
			t.Errorf("cause = %v, want ErrLeaseLost", cause)
		}
		return nil, false
	})
}

// hangingHeartbeats is a store whose heartbeats hang until their context
// ends, as calls to a server behind a network partition do.
type hangingHeartbeats struct{ idem.Store }

func (hangingHeartbeats) Heartbeat(ctx context.Context, _ idem.Key, _ idem.Lease, _ time.Duration) (idem.Lease, error) {
	<-ctx.Done()
	return idem.Lease{}, idem.Unavailable(ctx.Err())
}

// TestLeaseLapsesWhileHeartbeatsHang: a heartbeat that hangs is given up
// when the lease lapses, and the run is told then, rather than when (or
// if) the connection gives up.
func TestLeaseLapsesWhileHeartbeatsHang(t *testing.T) {
	hang := func(s idem.Store) idem.Store { return hangingHeartbeats{s} }
	t.Run("Do", func(t *testing.T) { checkDoLapse(t, hang, 150*time.Millisecond, 0) })
	t.Run("Owner", func(t *testing.T) { checkOwnerLapse(t, hang, 150*time.Millisecond) })
}

// slowFailingHeartbeats is a store whose heartbeats fail after taking
// their time, as calls to a server that times out do.
type slowFailingHeartbeats struct {
	idem.Store
	after time.Duration
}

func (s slowFailingHeartbeats) Heartbeat(ctx context.Context, _ idem.Key, _ idem.Lease, _ time.Duration) (idem.Lease, error) {
	select {
	case <-ctx.Done():
		return idem.Lease{}, idem.Unavailable(ctx.Err())
	case <-time.After(s.after):
		return idem.Lease{}, idem.Unavailable(errDown)
	}
}

// TestLeaseLapseCountsTheTimeHeartbeatsTake: heartbeats that each take a
// third of the lease to fail (beats every third of it) leave the lease
// lapsed a lease after it was granted, not after as many failures as fit
// in a lease, which would come a whole lease later.
func TestLeaseLapseCountsTheTimeHeartbeatsTake(t *testing.T) {
	const lease = 1500 * time.Millisecond
	slow := func(s idem.Store) idem.Store { return slowFailingHeartbeats{s, lease / 3} }
	checkDoLapse(t, slow, lease, 2*lease-lease/4)
}

// beatSignal wraps a store and signals every heartbeat that succeeds.
type beatSignal struct {
	idem.Store
	beats chan struct{}
}

func (s beatSignal) Heartbeat(ctx context.Context, k idem.Key, l idem.Lease, d time.Duration) (idem.Lease, error) {
	l, err := s.Store.Heartbeat(ctx, k, l, d)
	if err == nil {
		select {
		case s.beats <- struct{}{}:
		default:
		}
	}
	return l, err
}

// TestDoKeepsLeaseAfterCallerCancels: fn may go on after ctx is cancelled
// (finishing what it started), and what it returns is committed; until it
// returns the key stays its own, so the heartbeats go on too. Were they to
// stop with ctx, the lease would lapse under the running fn and a retry
// would take the key over and run fn a second time.
func TestDoKeepsLeaseAfterCallerCancels(t *testing.T) {
	s := beatSignal{Store: newMem(t, nil), beats: make(chan struct{}, 1)}
	k := testKey(t, "cancel-keeps-lease")
	ctx, cancel := context.WithCancel(context.Background())
	n, err := idem.Do(ctx, s, k, "req", func(runCtx context.Context) (int, error) {
		cancel()
		<-runCtx.Done()
		// Drop a beat that may have been sent before the cancellation,
		// then wait for two more.
		select {
		case <-s.beats:
		default:
		}
		for i := range 2 {
			select {
			case <-s.beats:
			case <-time.After(10 * time.Second):
				t.Errorf("heartbeat %d after the caller cancelled never came: the lease would lapse under fn", i+1)
				return 0, errors.New("no heartbeat")
			}
		}
		return 7, nil
	}, &idem.DoOpts{HeartbeatEvery: 5 * time.Millisecond})
	if err != nil || n != 7 {
		t.Fatalf("Do = %d, %v; want 7, nil", n, err)
	}
	if rec, err := s.Get(context.Background(), k); err != nil || rec.Status != idem.StatusCommitted {
		t.Errorf("record = %+v, %v; want committed", rec, err)
	}
}

// doWhileLeaseLapses runs Do on s with heartbeats that cannot reach it and
// a 60 ms lease: fn waits until its context ends (the lease lapsed), then
// returns what then returns.
func doWhileLeaseLapses(t *testing.T, s idem.Store, k idem.Key, then func(ctx context.Context) (int, error)) (int, error) {
	return idem.Do(context.Background(), unreachableHeartbeats{s}, k, "req", func(ctx context.Context) (int, error) {
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
			t.Error("fn's context still live 10s after its lease lapsed")
		}
		return then(ctx)
	}, &idem.DoOpts{Begin: &idem.BeginOpts{Lease: 60 * time.Millisecond}})
}

// TestDoLeaseLapsedNotTakenOverSettles: a lease that lapsed while the
// store could not be reached, and that nobody took over, still belongs to
// fn's run: fn's context is cancelled with cause ErrLeaseLost, but what fn
// returns is committed as usual.
func TestDoLeaseLapsedNotTakenOverSettles(t *testing.T) {
	s := newMem(t, nil)
	k := testKey(t, "lapsed-kept")
	n, err := doWhileLeaseLapses(t, s, k, func(ctx context.Context) (int, error) {
		if cause := context.Cause(ctx); !errors.Is(cause, idem.ErrLeaseLost) {
			t.Errorf("cause = %v, want ErrLeaseLost", cause)
		}
		return 1, nil
	})
	if n != 1 || err != nil {
		t.Errorf("Do = %d, %v; want 1, nil", n, err)
	}
	if rec, err := s.Get(context.Background(), k); err != nil || rec.Status != idem.StatusCommitted || string(rec.Result) != "1" {
		t.Errorf("record = %+v, %v; want committed 1", rec, err)
	}
}

// TestDoLeaseLostErrorSaysSo: fn that returns ctx.Err() once its lease is
// lost gives Do's caller an error that says so (ErrLeaseLost) as well as
// fn's own (context.Canceled), though the caller's ctx is live; the key is
// released, not recorded as failed.
func TestDoLeaseLostErrorSaysSo(t *testing.T) {
	s := newMem(t, nil)
	k := testKey(t, "lapsed-ctx-err")
	_, err := doWhileLeaseLapses(t, s, k, func(ctx context.Context) (int, error) { return 0, ctx.Err() })
	if !errors.Is(err, idem.ErrLeaseLost) || !errors.Is(err, context.Canceled) {
		t.Errorf("Do = %v; want fn's context.Canceled with ErrLeaseLost", err)
	}
	if _, err := s.Get(context.Background(), k); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("Get = %v; want the key released (ErrNotFound)", err)
	}
}

// stalling is a store whose Commit and FailPermanent hang until their
// context ends, as over a network partition, and then fail as networked
// stores do.
type stalling struct{ idem.Store }

func (s *stalling) Commit(ctx context.Context, _ idem.Key, _ idem.Lease, _ []byte) error {
	<-ctx.Done()
	return idem.Unavailable(ctx.Err())
}

func (s *stalling) FailPermanent(ctx context.Context, _ idem.Key, _ idem.Lease, _ idem.StoredError) error {
	<-ctx.Done()
	return idem.Unavailable(ctx.Err())
}

// TestDoReleasesAfterSettleTimesOut: a Commit or FailPermanent cut short by
// DoOpts.SettleTimeout did not record anything, and Do releases the key
// with a settle call of its own, not with the context that has just run
// out: a retry runs fn again at once instead of waiting out the lease.
func TestDoReleasesAfterSettleTimesOut(t *testing.T) {
	ctx := context.Background()
	mem := newMem(t, nil)
	s := &stalling{mem}
	opts := &idem.DoOpts{SettleTimeout: 50 * time.Millisecond}
	for name, fn := range map[string]func(context.Context) (int, error){
		"commit":    func(context.Context) (int, error) { return 3, nil },
		"permanent": func(context.Context) (int, error) { return 0, idem.Permanent("declined", errors.New("declined")) },
	} {
		k := testKey(t, "settle-times-out-"+name)
		if _, err := idem.Do(ctx, s, k, "req", fn, opts); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: Do = %v, want the settle call's context.DeadlineExceeded", name, err)
		}
		if rec, err := mem.Get(ctx, k); !errors.Is(err, idem.ErrNotFound) {
			t.Errorf("%s: record after a settle call that timed out: %+v, %v; want the key released", name, rec, err)
		}
	}
}
