package redisstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
	"github.com/idemgo/idem/internal/redistest"
	"github.com/idemgo/idem/store/redisstore"
)

// TestRestartUnderLoad stops and restarts a private Redis server in the
// middle of a run of concurrent Begin+Commit pairs. While it is down every
// call fails with ErrUnavailable; nothing panics; afterwards the store
// works again and every record is absent or consistent.
//
// A graceful stop saves the data set (SHUTDOWN SAVE), so across it no
// acknowledged write may be lost: no key is handed out Fresh twice or
// committed twice. A kill loses the data set (the server runs without
// persistence, as the package documentation warns), so across it only
// "absent or consistent" holds.
func TestRestartUnderLoad(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		stop    func(*redistest.Server) error
		durable bool
		auto    bool
	}{
		{"Stop", (*redistest.Server).Stop, true, false},
		{"Kill", (*redistest.Server).Kill, false, false},
		{"Stop/AutoPipeline", (*redistest.Server).Stop, true, true},
		{"Kill/AutoPipeline", (*redistest.Server).Kill, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := redistest.Start(t)
			client := redis.NewClient(&redis.Options{
				Addr:          srv.Addr(),
				MaxRetries:    1,
				DialerRetries: 1,
				DialTimeout:   time.Second,
				PoolSize:      16,
			})
			t.Cleanup(func() { _ = client.Close() })
			s, err := redisstore.New(client, redisstore.Config{Lease: time.Minute, AutoPipeline: c.auto})
			if err != nil {
				t.Fatal(err)
			}
			run := &faultRun{t: t, s: s, durable: c.durable, ns: idemtest.RandomNamespace(t), req: mustRequest(t, `{"op":"pay"}`)}
			run.start(16)
			run.phase(0, 300*time.Millisecond)
			run.untilAnswered(0)
			if err := c.stop(srv); err != nil {
				t.Error(err)
			}
			run.phase(1, 300*time.Millisecond)
			run.untilFailed(1)
			if err := srv.Start(); err != nil {
				t.Fatal(err)
			}
			// After PoolSize failed dials go-redis fails fast until a
			// probe, once a second, finds the server again.
			run.phase(2, 2*time.Second)
			run.untilAnswered(2)
			run.finish()
			run.check(client)
		})
	}
}

// faultRun is one run of workers against a store whose server goes away.
type faultRun struct {
	t       *testing.T
	s       *redisstore.Store
	durable bool
	ns      idem.Namespace
	req     idem.Request

	seq     atomic.Int64
	current atomic.Int32    // the phase: 0 up, 1 down, 2 up again
	ok      [3]atomic.Int64 // calls that reached Redis, by phase
	failed  [3]atomic.Int64 // calls that failed with ErrUnavailable, by phase
	stop    chan struct{}
	wg      sync.WaitGroup

	mu        sync.Mutex
	fresh     map[string][]idem.Lease    // Fresh leases handed out, by key value
	committed map[string][]string        // tokens whose Commit succeeded
	tried     map[string]map[string]bool // tokens whose Commit was sent
}

func (r *faultRun) start(workers int) {
	r.stop = make(chan struct{})
	r.fresh = map[string][]idem.Lease{}
	r.committed = map[string][]string{}
	r.tried = map[string]map[string]bool{}
	for range workers {
		r.wg.Add(1)
		go r.work()
	}
}

// phase sets the phase and lets the workers run for d.
func (r *faultRun) phase(p int32, d time.Duration) {
	r.current.Store(p)
	time.Sleep(d)
}

// untilAnswered lets the workers run on in phase p until a call of the
// phase has been answered, for up to answerWithin: on a loaded machine
// (the test runs beside others, under -race) the first calls may take
// longer than the phase.
func (r *faultRun) untilAnswered(p int32) {
	deadline := time.Now().Add(answerWithin)
	for r.ok[p].Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
}

// untilFailed lets the workers run on in phase p until a call of the
// phase has failed, for up to answerWithin: on a loaded machine the calls
// under way when the server went away may take longer than the phase to
// fail.
func (r *faultRun) untilFailed(p int32) {
	deadline := time.Now().Add(answerWithin)
	for r.failed[p].Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
}

// answerWithin bounds how long untilAnswered and untilFailed wait.
const answerWithin = 15 * time.Second

func (r *faultRun) finish() {
	close(r.stop)
	r.wg.Wait()
	for p, want := range []string{"before the outage", "during the outage", "after the restart"} {
		r.t.Logf("%s: %d calls answered, %d unavailable", want, r.ok[p].Load(), r.failed[p].Load())
	}
	if r.ok[0].Load() == 0 || r.ok[2].Load() == 0 {
		r.t.Errorf("no call succeeded before the outage or after the restart")
	}
	if r.failed[1].Load() == 0 {
		r.t.Errorf("no call failed while the server was down")
	}
}

// work begins keys that four workers share, one after the other, and
// commits what it gets Fresh.
func (r *faultRun) work() {
	defer r.wg.Done()
	for {
		select {
		case <-r.stop:
			return
		default:
		}
		value := "k-" + strconv.FormatInt(r.seq.Add(1)/4, 10)
		key := mustKey(r.t, r.ns, value)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		o, err := r.s.Begin(ctx, key, r.req, nil)
		if r.note("Begin", err) && o.Kind == idem.Fresh {
			r.mu.Lock()
			r.fresh[value] = append(r.fresh[value], o.Lease)
			if r.tried[value] == nil {
				r.tried[value] = map[string]bool{}
			}
			r.tried[value][o.Lease.Token] = true
			r.mu.Unlock()
			err := r.s.Commit(ctx, key, o.Lease, result(o.Lease.Token))
			if errors.Is(err, idem.ErrStaleToken) && !r.durable {
				err = nil // the reservation was lost with the server's data
			} else if r.note("Commit", err) {
				r.mu.Lock()
				r.committed[value] = append(r.committed[value], o.Lease.Token)
				r.mu.Unlock()
			}
		} else if err == nil && o.Kind == idem.Mismatch {
			r.t.Errorf("Begin(%s) = mismatch for the only request ever sent", value)
		}
		cancel()
	}
}

// note counts a call's error and reports whether the call succeeded. Any
// error but ErrUnavailable fails the test.
func (r *faultRun) note(op string, err error) bool {
	p := r.current.Load()
	switch {
	case err == nil:
		r.ok[p].Add(1)
		return true
	case errors.Is(err, idem.ErrUnavailable):
		r.failed[p].Add(1)
	default:
		r.t.Errorf("%s: %v, want nil or ErrUnavailable", op, err)
	}
	return false
}

func result(token string) []byte {
	b, _ := json.Marshal(map[string]string{"token": token})
	return b
}

// check reads back every record of the namespace and every key the
// workers touched.
func (r *faultRun) check(client *redis.Client) {
	ctx := context.Background()
	t := r.t
	values := map[string]bool{}
	for v := range r.tried {
		values[v] = true
	}
	// Records whose Begin reply was lost are in Redis but in no map.
	keys, err := client.Keys(ctx, redisstore.DefaultPrefix+string(r.ns)+":*").Result()
	if err != nil {
		t.Fatal(err)
	}
	prefix := redisstore.DefaultPrefix + string(r.ns) + ":0::"
	for _, k := range keys {
		values[k[len(prefix):]] = true
	}
	t.Logf("%d records in Redis, %d keys handed out Fresh", len(keys), len(r.fresh))
	for value := range values {
		fresh, committed, tried := r.fresh[value], r.committed[value], r.tried[value]
		if r.durable && len(fresh) > 1 {
			t.Errorf("%s: handed out Fresh %d times: %+v", value, len(fresh), fresh)
		}
		if r.durable && len(committed) > 1 {
			t.Errorf("%s: committed %d times", value, len(committed))
		}
		rec, err := r.s.Get(ctx, mustKey(t, r.ns, value))
		if errors.Is(err, idem.ErrNotFound) {
			if r.durable && len(fresh) > 0 {
				t.Errorf("%s: handed out Fresh, then lost across a graceful restart", value)
			}
			continue
		}
		if err != nil {
			t.Errorf("Get(%s): %v", value, err)
			continue
		}
		if rec.Fingerprint != r.req.Fingerprint || rec.Fence != 1 {
			t.Errorf("%s: record has another fingerprint or fence %d (no takeover can have happened)", value, rec.Fence)
		}
		switch rec.Status {
		case idem.StatusInProgress:
			if r.durable && len(committed) > 0 {
				t.Errorf("%s: a Commit succeeded, the record is in progress", value)
			}
		case idem.StatusCommitted:
			var res struct{ Token string }
			if err := json.Unmarshal(rec.Result, &res); err != nil || !tried[res.Token] {
				t.Errorf("%s: committed result %s is no owner's", value, rec.Result)
			}
			if r.durable && len(fresh) == 1 && res.Token != fresh[0].Token {
				t.Errorf("%s: committed by %s, but the only Fresh lease was %s", value, res.Token, fresh[0].Token)
			}
			if len(committed) > 0 && committed[len(committed)-1] != res.Token {
				t.Errorf("%s: committed result %s, but the last successful Commit was by %s", value, rec.Result, committed[len(committed)-1])
			}
		default:
			t.Errorf("%s: status %q", value, rec.Status)
		}
	}
}
