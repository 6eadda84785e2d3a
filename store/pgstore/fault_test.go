package pgstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
	"github.com/idemgo/idem/internal/pgtest"
	"github.com/idemgo/idem/store/pgstore"
)

// grant is a Fresh outcome as a worker received it.
type grant struct {
	worker     int
	fence      int64
	start, end time.Time // the store's clock when granted; lease expiry
}

// faultResult is what a worker commits: who, under which fence.
type faultResult struct {
	Worker int   `json:"worker"`
	Fence  int64 `json:"fence"`
}

// TestFaultServerRestart stops (or kills) the server in the middle of a
// run of concurrent Begin/Commit workers and starts it again. While it is
// down, every failing call reports ErrUnavailable and nothing panics.
// A worker whose Commit fails repeats it until it gets an answer.
// Afterwards every key ends up committed exactly once, by the owner of its
// current fence; no Fresh was handed out while another worker's lease on
// the key was live; and no two workers had a commit accepted for one key.
func TestFaultServerRestart(t *testing.T) {
	for _, tc := range []struct {
		name     string
		down     func(*pgtest.Server) error
		pipeline bool
	}{
		{"Stop", (*pgtest.Server).Stop, false},
		{"Kill", (*pgtest.Server).Kill, false},
		{"Stop/Pipeline", (*pgtest.Server).Stop, true},
		{"Kill/Pipeline", (*pgtest.Server).Kill, true},
	} {
		t.Run(tc.name, func(t *testing.T) { faultRun(t, tc.down, tc.pipeline) })
	}
}

func faultRun(t *testing.T, down func(*pgtest.Server) error, pipeline bool) {
	const (
		workers = 8
		nkeys   = 600
		lease   = time.Second
	)
	srv := pgtest.Start(t)
	pc, err := pgxpool.ParseConfig(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	pc.MaxConns = workers
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s, err := pgstore.New(pool, pgstore.Config{Lease: lease, Pipeline: pipeline, PipelineLanes: 2, PipelineDepth: 4})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	ns := idemtest.RandomNamespace(t)
	keys := make([]idem.Key, nkeys)
	for i := range keys {
		keys[i] = mustKey(t, ns, fmt.Sprintf("key-%02d", i))
	}
	req := mustRequest(t, `{"op":"charge"}`)

	var (
		mu          sync.Mutex
		grants      = map[int][]grant{} // key index → Fresh outcomes
		commitsOK   = map[int][]faultResult{}
		done        = make([]bool, nkeys)
		low         int // every key below is done
		remaining   atomic.Int64
		unavailable atomic.Int64
		unexpected  = make(chan error, 100)
	)
	remaining.Store(nkeys)
	report := func(op string, err error) {
		if errors.Is(err, idem.ErrUnavailable) {
			unavailable.Add(1)
			time.Sleep(5 * time.Millisecond)
			return
		}
		select {
		case unexpected <- fmt.Errorf("%s: %w", op, err):
		default:
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(uint64(w), 1))
			for {
				select {
				case <-stop:
					return
				default:
				}
				if remaining.Load() == 0 {
					return
				}
				// Work through the keys in order, a few at a time, so that
				// workers often meet on a key.
				mu.Lock()
				i := min(low+rnd.IntN(4), nkeys-1)
				finished := done[i]
				mu.Unlock()
				if finished {
					continue
				}
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				o, err := s.Begin(ctx, keys[i], req, nil)
				if err != nil {
					cancel()
					report("Begin", err)
					continue
				}
				switch o.Kind {
				case idem.Fresh:
					mu.Lock()
					grants[i] = append(grants[i], grant{w, o.Lease.Fence, o.Lease.ExpiresAt.Add(-o.Lease.TTL), o.Lease.ExpiresAt})
					mu.Unlock()
					time.Sleep(time.Duration(rnd.IntN(3)) * time.Millisecond) // the work
					res := faultResult{Worker: w, Fence: o.Lease.Fence}
					b, _ := json.Marshal(res)
					err := s.Commit(ctx, keys[i], o.Lease, b)
					for try := 0; errors.Is(err, idem.ErrUnavailable) && try < 100; try++ {
						// The reply may have been lost after the commit
						// was made: repeating it is safe.
						unavailable.Add(1)
						time.Sleep(10 * time.Millisecond)
						err = s.Commit(ctx, keys[i], o.Lease, b)
					}
					switch {
					case err == nil:
						mu.Lock()
						commitsOK[i] = append(commitsOK[i], res)
						mu.Unlock()
					case errors.Is(err, idem.ErrStaleToken):
						// Taken over after this worker's lease lapsed.
					default:
						report("Commit", err)
					}
				case idem.PriorResult:
					mu.Lock()
					if !done[i] {
						done[i] = true
						remaining.Add(-1)
					}
					for low < nkeys-1 && done[low] {
						low++
					}
					mu.Unlock()
				case idem.InFlight:
					time.Sleep(time.Millisecond)
				default:
					report("Begin", fmt.Errorf("unexpected outcome %s", o.Kind))
				}
				cancel()
			}
		}()
	}

	// Take the server down once the run is well under way.
	for start := time.Now(); remaining.Load() > nkeys-100; time.Sleep(time.Millisecond) {
		if time.Since(start) > 30*time.Second {
			close(stop)
			wg.Wait()
			t.Fatalf("only %d keys done after 30s", nkeys-remaining.Load())
		}
	}
	if err := down(srv); err != nil {
		t.Errorf("stopping the server: %v", err)
	}
	time.Sleep(300 * time.Millisecond)
	if err := srv.Start(); err != nil {
		close(stop)
		wg.Wait()
		t.Fatal(err)
	}
	deadline := time.After(30 * time.Second)
	for remaining.Load() > 0 {
		select {
		case <-deadline:
			t.Errorf("%d keys still not committed 30s after the restart", remaining.Load())
			close(stop)
			wg.Wait()
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
	close(stop)
	wg.Wait()
	close(unexpected)
	for err := range unexpected {
		t.Errorf("error that is not ErrUnavailable: %v", err)
	}
	if unavailable.Load() == 0 {
		t.Error("no call failed with ErrUnavailable: the outage was not observed")
	}

	ctx := ctxT(t)
	totalGrants := 0
	for i, k := range keys {
		gs := grants[i]
		totalGrants += len(gs)
		sort.Slice(gs, func(a, b int) bool { return gs[a].fence < gs[b].fence })
		for j := 1; j < len(gs); j++ {
			prev, cur := gs[j-1], gs[j]
			if cur.fence == prev.fence {
				t.Errorf("%s: fence %d handed out twice (workers %d and %d)", k, cur.fence, prev.worker, cur.worker)
			}
			if cur.start.Before(prev.end) {
				t.Errorf("%s: Fresh (fence %d) granted at %v while fence %d's lease ran until %v",
					k, cur.fence, cur.start, prev.fence, prev.end)
			}
		}
		if len(commitsOK[i]) > 1 {
			t.Errorf("%s: %d commits accepted: %+v", k, len(commitsOK[i]), commitsOK[i])
		}
		rec, err := s.Get(ctx, k)
		for try := 0; errors.Is(err, idem.ErrUnavailable) && try < 10; try++ {
			// The pool hands out connections from before the restart
			// until it has found each one broken.
			rec, err = s.Get(ctx, k)
		}
		if err != nil {
			t.Errorf("%s: Get: %v", k, err)
			continue
		}
		var res faultResult
		if rec.Status != idem.StatusCommitted || json.Unmarshal(rec.Result, &res) != nil {
			t.Errorf("%s: record %s %s, want committed with a result", k, rec.Status, rec.Result)
			continue
		}
		if res.Fence != rec.Fence {
			t.Errorf("%s: committed by the owner of fence %d, but the record's fence is %d", k, res.Fence, rec.Fence)
		}
		if len(gs) > 0 && gs[len(gs)-1].fence > rec.Fence {
			t.Errorf("%s: a worker got fence %d, above the record's %d", k, gs[len(gs)-1].fence, rec.Fence)
		}
		if c := commitsOK[i]; len(c) == 1 && c[0] != res {
			t.Errorf("%s: stored result %+v, but the accepted commit was %+v", k, res, c[0])
		}
	}
	t.Logf("%d Fresh grants for %d keys, %d calls failed with ErrUnavailable", totalGrants, nkeys, unavailable.Load())
}
