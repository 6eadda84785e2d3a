package durable_test

import (
	"context"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgo/idem/durable"
)

// rlState names the rate-limit bucket an instance was inserted with, so
// that its step can record it.
type rlState struct {
	Key string `json:"key"`
}

// starts records times of steps by the key in their state: when they
// started (rlFSM), or when their rows were claimed (claimFSM).
type starts struct {
	mu sync.Mutex
	at map[string][]time.Time
}

func newStarts() *starts { return &starts{at: map[string][]time.Time{}} }

func (s *starts) add(key string) { s.addAt(key, time.Now()) }

func (s *starts) addAt(key string, at time.Time) {
	s.mu.Lock()
	s.at[key] = append(s.at[key], at)
	s.mu.Unlock()
}

// of returns the times recorded for key's steps, in order.
func (s *starts) of(key string) []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.at[key])
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out
}

func (s *starts) count(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.at[key])
}

// rlFSM records its start and ends done.
func rlFSM(t testing.TB, s *starts) *durable.FSM[rlState] {
	return mustFSM(t, durable.FSMConfig[rlState]{
		Name:    "rl",
		Initial: "run",
		Steps: map[string]durable.StepFunc[rlState]{
			"run": func(ctx context.Context, st *durable.Step[rlState]) (durable.Outcome, error) {
				s.add(st.State.Key)
				return durable.Done(nil), nil
			},
		},
	})
}

// claimFSM records, in s, when each step's row was claimed, as the
// database's clock has it: the row's updated_at, which the claim that
// leased it set to the time of its statement and which nothing changes
// while the step runs (the heartbeat extends only lease_expires_at; the
// outcome's commit comes after the step). A queue's picker claims one
// statement after the other, so with one engine and one queue these times
// order the grants of a bucket however late any step starts, and rows
// granted by one claim share one. *b is read once the step runs, after
// the engine's start.
func claimFSM(t *testing.T, s *starts, b **testBundle) *durable.FSM[rlState] {
	return mustFSM(t, durable.FSMConfig[rlState]{
		Name:    "rl",
		Initial: "run",
		Steps: map[string]durable.StepFunc[rlState]{
			"run": func(ctx context.Context, st *durable.Step[rlState]) (durable.Outcome, error) {
				var at time.Time
				err := (*b).pool.QueryRow(ctx, `SELECT updated_at FROM durable_instance WHERE id = $1 AND status = 'executing'`,
					st.ID).Scan(&at)
				if err != nil {
					// Not retried: a row claimed again would seem granted late.
					t.Errorf("the claim time of instance %d (%s): %v", st.ID, st.State.Key, err)
					return durable.Done(nil), nil
				}
				s.addAt(st.State.Key, at)
				return durable.Done(nil), nil
			},
		},
	})
}

// rlEvents records the rate-limit events.
type rlEvents struct {
	mu        sync.Mutex
	throttled []durable.RateLimitThrottledEvent
	unknown   []durable.RateLimitUnknownEvent
}

func (r *rlEvents) hook(h *durable.Hooks) {
	h.RateLimitThrottled = func(e durable.RateLimitThrottledEvent) {
		r.mu.Lock()
		r.throttled = append(r.throttled, e)
		r.mu.Unlock()
	}
	h.RateLimitUnknown = func(e durable.RateLimitUnknownEvent) {
		r.mu.Lock()
		r.unknown = append(r.unknown, e)
		r.mu.Unlock()
	}
}

func (r *rlEvents) get() ([]durable.RateLimitThrottledEvent, []durable.RateLimitUnknownEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.throttled), slices.Clone(r.unknown)
}

// rlConfig is fast() with rate limits and events.
func rlConfig(fsm durable.Definition, ev *rlEvents, limits map[string]durable.RateLimit) *durable.Config {
	cfg := fast(fsm)
	cfg.Queues = map[string]durable.QueueConfig{durable.DefaultQueue: {Concurrency: 8}}
	cfg.RateLimits = limits
	cfg.PollInterval = 50 * time.Millisecond
	if ev != nil {
		ev.hook(&cfg.Hooks)
	}
	return cfg
}

// insertLimited inserts n instances naming key with weight, in one
// InsertAll.
func insertLimited(t *testing.T, b *testBundle, fsm *durable.FSM[rlState], key string, weight, n int) {
	t.Helper()
	ps := make([]durable.InsertParams, n)
	for i := range ps {
		ps[i] = durable.InsertParams{Args: fsm.With(rlState{Key: key}), Opts: &durable.InsertOpts{RateLimit: key, RateLimitWeight: weight}}
	}
	if _, err := b.client.InsertAll(ctxT(t), ps); err != nil {
		t.Fatal(err)
	}
}

// checkRate fails t if more steps started, by any time, than a bucket of
// burst tokens refilling at rate per second, with rows of cost tokens
// each, can have granted since from, plus slack rows. from is a time
// before the engine started: the bucket holds at most its burst then, so
// that by any later time T it has granted at most burst + rate×(T−from),
// however its grants fell. A step starts after its grant, so delays on a
// loaded machine, of the first step as of any other, only make the count
// by T smaller. (The first start is no such origin: a first step delayed
// after its grant, with the grants of that time starting at once after it,
// would seem to exceed the rate.) The grants are timed on the database's
// clock, the starts on the test's; slack covers the rounding between them.
//
// This bounds the starts from below, in time, however late the engine
// began: step i starts no sooner than from + ((i+1−slack)×cost − burst) /
// rate. But on its own it does not show that the bucket limits at all: an
// engine that started late enough passes it unlimited. checkWindows does.
func checkRate(t *testing.T, from time.Time, at []time.Time, cost int, rate float64, burst, slack int) {
	t.Helper()
	if len(at) == 0 {
		t.Fatal("no step started")
	}
	for i, ti := range at {
		allowed := (float64(burst+slack*cost) + rate*ti.Sub(from).Seconds()) / float64(cost)
		if float64(i+1) > allowed {
			t.Fatalf("%d steps of cost %d started within %s of the engine's start: a bucket of %d at %.0f/s allows %.1f (with %d of slack)",
				i+1, cost, ti.Sub(from), burst, rate, allowed, slack)
		}
	}
}

// checkWindows fails t if, between any two starts, more steps started
// than can have been granted before the window and not yet started, plus
// what the bucket can grant within it, plus slack rows. Before the window
// at most inFlight granted rows wait to start: a picker leases rows only
// into its engine's room (Concurrency + Prefetch of the queue, less the
// rows leased and not yet finished), so inFlight is the sum of that over
// the engines. Within the window of length d the bucket grants at most
// burst + rate×d tokens. So, on any machine, however late any step
// started, the steps i..j take
//
//	at[j] − at[i] ≥ ((j−i+1 − inFlight − slack)×cost − burst) / rate,
//
// which a bucket that does not limit fails, its rows starting as fast as
// the workers take them. (A bound from the first start that leaves out
// inFlight fails a bucket that limits: rows granted while the first step
// was held up start at once after it.)
func checkWindows(t *testing.T, at []time.Time, cost int, rate float64, burst, inFlight, slack int) {
	t.Helper()
	for i := range at {
		for j := i; j < len(at); j++ {
			d := at[j].Sub(at[i])
			allowed := float64(inFlight+slack) + (float64(burst)+rate*d.Seconds())/float64(cost)
			if float64(j-i+1) > allowed {
				t.Fatalf("steps %d to %d (%d of cost %d) started within %s: with %d in flight, a bucket of %d at %.0f/s allows %.1f (with %d of slack)",
					i+1, j+1, j-i+1, cost, d, inFlight, burst, rate, allowed, slack)
			}
		}
	}
}

// waitStarted waits until n steps of key have started and returns their
// start times, failing t if they have not within limit of from, a time
// before the engine started. That is the floor on the rate the tests
// pin: a bucket that grants n rows of cost tokens in limit from full runs
// at no less than (n×cost − burst)/limit tokens per second.
func waitStarted(t *testing.T, s *starts, key string, n int, from time.Time, limit time.Duration) []time.Time {
	t.Helper()
	for s.count(key) < n {
		if time.Since(from) > limit {
			t.Fatalf("%d of %d steps of %s started within %s of the engine's start", s.count(key), n, key, limit)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return s.of(key)
}

// TestRateLimitEnforcesRate runs 50 rows through a bucket of 20/s with a
// burst of 5 on 8 workers: all of them run, the picker reports the limit
// biting, and the starts keep the rate, whatever delays a loaded machine
// adds. No more start by any time than the bucket can have granted since
// before the engine started (checkRate), nor within any window than the 8
// the workers can hold plus what the bucket grants in it (checkWindows):
// 50 rows take at least (50−8−5−1)/20 = 1.8 s from the first start to the
// last, which a bucket that does not limit fails. They must all have
// started within 20 s of the engine's start (2.25 s at the full rate), a
// floor of (50−5)/20 = 2.25 tokens per second, a ninth of the rate.
func TestRateLimitEnforcesRate(t *testing.T) {
	t.Parallel()
	s, ev := newStarts(), &rlEvents{}
	fsm := rlFSM(t, s)
	b := setup(t, rlConfig(fsm, ev, map[string]durable.RateLimit{"api": {Limit: 20, Burst: 5}}))
	insertLimited(t, b, fsm, "api", 0, 50)
	from := time.Now()
	b.start(t)
	at := waitStarted(t, s, "api", 50, from, 20*time.Second)
	t.Logf("50 steps at 20/s with a burst of 5: first %s, last %s after the engine's start",
		at[0].Sub(from).Round(time.Millisecond), at[49].Sub(from).Round(time.Millisecond))
	checkRate(t, from, at, 1, 20, 5, 1)
	checkWindows(t, at, 1, 20, 5, 8, 1)
	throttled, unknown := ev.get()
	if len(unknown) != 0 {
		t.Errorf("unknown events: %+v", unknown)
	}
	if len(throttled) == 0 {
		t.Fatal("no RateLimitThrottled event")
	}
	for _, e := range throttled {
		if e.Key != "api" || e.Queue != durable.DefaultQueue || e.Granted >= e.Wanted || e.Wanted > 50 {
			t.Fatalf("throttled event %+v", e)
		}
	}
	if n := b.count(t, "SELECT count(*) FROM durable_rate_limit_bucket WHERE key = 'api'"); n != 1 {
		t.Fatalf("%d buckets for api", n)
	}
}

// TestRateLimitWeights: rows cost their weight, a weight above the burst
// costs the burst instead of stalling, and a heavy row at the head of its
// bucket is not overtaken by light rows behind it.
func TestRateLimitWeights(t *testing.T) {
	t.Parallel()
	// The bucket holds 5 tokens; the head row costs 10 (its weight of 50
	// is capped at the burst), the rows behind it 1 each. The check is on
	// when the rows were claimed, not when their steps started: a loaded
	// machine can hold up the heavy row's step until the light rows,
	// granted after it, start with it. The heavy row must be claimed
	// before every light row, by an earlier claim: no claim can grant it
	// and a light row together, as the bucket never holds more than its
	// 10. A bucket that charged the heavy row 1 token would grant it with
	// light rows in the first claim; one that let light rows pass it
	// would grant them first.
	s := newStarts()
	var b *testBundle
	fsm := claimFSM(t, s, &b)
	b = setup(t, rlConfig(fsm, nil, map[string]durable.RateLimit{"w": {Limit: 10, Burst: 10}}))
	heavy := b.insert(t, fsm.With(rlState{Key: "heavy"}), &durable.InsertOpts{RateLimit: "w", RateLimitWeight: 50})
	for range 5 {
		b.insert(t, fsm.With(rlState{Key: "light"}), &durable.InsertOpts{RateLimit: "w", Priority: 1})
	}
	b.exec(t, "UPDATE durable_rate_limit_bucket SET tokens = 5, updated_at = now() WHERE key = 'w'")
	b.start(t)
	b.waitStatus(t, heavy, durable.StatusDone)
	waitFor(t, "the light rows", func() bool { return s.count("light") == 5 })
	if t.Failed() {
		t.FailNow()
	}
	h, l := s.of("heavy"), s.of("light")
	if len(h) != 1 {
		t.Fatalf("the heavy row's step ran %d times, want once", len(h))
	}
	t.Logf("the heavy row claimed at %s, the light rows %s to %s after it",
		h[0].Format(time.StampMicro), l[0].Sub(h[0]), l[4].Sub(h[0]))
	if !h[0].Before(l[0]) {
		t.Fatalf("a light row was claimed at %s, not after the heavy head row at %s",
			l[0].Format(time.StampMicro), h[0].Format(time.StampMicro))
	}

	// 8 rows of weight 5 (cost 5) from a full bucket of 10 refilling at
	// 10/s, on one worker, so that at most one granted row waits to start
	// however late any step starts (checkWindows): 40 tokens take at least
	// (40−5−10−5)/10 = 2 s from the first start to the last (less a row in
	// flight, the burst and a row of slack), and no more start by any time
	// than the bucket can have granted since before the engine started
	// (checkRate). A bucket that charged rows 1 token each, or nothing,
	// would start them all at once. They must all have started within 20 s
	// of the engine's start (3 s at the full rate): a floor of (40−10)/20 =
	// 1.5 tokens per second.
	s2 := newStarts()
	fsm2 := rlFSM(t, s2)
	cfg2 := rlConfig(fsm2, nil, map[string]durable.RateLimit{"w": {Limit: 10, Burst: 10}})
	cfg2.Queues = map[string]durable.QueueConfig{durable.DefaultQueue: {Concurrency: 1}}
	b2 := setup(t, cfg2)
	insertLimited(t, b2, fsm2, "w5", 5, 8)
	b2.exec(t, "UPDATE durable_instance SET rate_limit = 'w'")
	b2.exec(t, "INSERT INTO durable_rate_limit_bucket (key) VALUES ('w')")
	from := time.Now()
	b2.start(t)
	at := waitStarted(t, s2, "w5", 8, from, 20*time.Second)
	t.Logf("8 rows of weight 5 at 10/s with a burst of 10: first %s, last %s after the engine's start",
		at[0].Sub(from).Round(time.Millisecond), at[7].Sub(from).Round(time.Millisecond))
	checkRate(t, from, at, 5, 10, 10, 1)
	checkWindows(t, at, 5, 10, 10, 1, 1)
}

// TestRateLimitPartitionsAreFair loads two partitions of one limit, all of
// partition a ahead of partition b in pick order: each partition has its
// own bucket, so both run at their rate at once, b not starved behind a.
//
// Nothing here depends on how fast the machine is. The test waits until
// each partition has started fairWant steps (in about 2 s at 10/s; a
// partition that takes half a minute runs at a small part of its rate),
// then checks that when either had started fairWant, the other had
// started at least half as many (both buckets refill alike, so the
// partitions go in step however slowly; one starved behind the other has
// started none or its burst), and that neither ever started more than
// its bucket grants, counted from before the engine started.
func TestRateLimitPartitionsAreFair(t *testing.T) {
	t.Parallel()
	const fairWant = 20
	s := newStarts()
	fsm := rlFSM(t, s)
	b := setup(t, rlConfig(fsm, nil, map[string]durable.RateLimit{"tenant": {Limit: 10, Burst: 2}}))
	ka, kb := durable.RateLimitKey("tenant", "a"), durable.RateLimitKey("tenant", "b")
	insertLimited(t, b, fsm, ka, 1, 60)
	insertLimited(t, b, fsm, kb, 1, 60)
	from := time.Now()
	b.start(t)
	for deadline := time.Now().Add(30 * time.Second); s.count(ka) < fairWant || s.count(kb) < fairWant; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("in 30 s at 10/s each, partition a started %d steps and b %d; want %d each", s.count(ka), s.count(kb), fairWant)
		}
	}
	if err := b.client.Stop(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	at := map[string][]time.Time{ka: s.of(ka), kb: s.of(kb)}
	t.Logf("in %s at 10/s each: a %d, b %d", time.Since(from).Round(time.Millisecond), len(at[ka]), len(at[kb]))
	for _, p := range [][2]string{{ka, kb}, {kb, ka}} {
		k, other := p[0], p[1]
		when := at[k][fairWant-1]
		n := 0 // the other's steps started by then
		for n < len(at[other]) && !at[other][n].After(when) {
			n++
		}
		t.Logf("when %s had started %d steps, %s had started %d", k, fairWant, other, n)
		if n < fairWant/2 {
			t.Errorf("when partition %s had started %d steps (%s after the engine's start), %s had started %d: starved",
				k, fairWant, when.Sub(from), other, n)
		}
		checkRate(t, from, at[k], 1, 10, 2, 1)
	}
	if n := b.count(t, "SELECT count(*) FROM durable_rate_limit_bucket WHERE key LIKE 'tenant:%'"); n != 2 {
		t.Fatalf("%d buckets for tenant, want one per partition", n)
	}
}

// TestRateLimitDoesNotBlockOthers: rows of an exhausted bucket, ahead of
// unlimited rows in pick order, hold nothing back.
func TestRateLimitDoesNotBlockOthers(t *testing.T) {
	t.Parallel()
	s := newStarts()
	fsm := rlFSM(t, s)
	b := setup(t, rlConfig(fsm, nil, map[string]durable.RateLimit{"slow": {Limit: 1, Period: time.Hour}}))
	insertLimited(t, b, fsm, "slow", 1, 30)
	var free []int64
	for range 20 {
		free = append(free, b.insert(t, fsm.With(rlState{Key: "free"}), &durable.InsertOpts{Priority: 1}))
	}
	b.start(t)
	for _, id := range free {
		b.waitStatus(t, id, durable.StatusDone)
	}
	time.Sleep(200 * time.Millisecond)
	if n := s.count("slow"); n != 1 {
		t.Fatalf("%d rows of a bucket of 1 per hour ran", n)
	}
	if n := b.count(t, "SELECT count(*) FROM durable_instance WHERE rate_limit = 'slow' AND status = 'runnable'"); n != 29 {
		t.Fatalf("%d rows of the slow bucket runnable, want 29", n)
	}
}

// TestRateLimitUnknownName: rows naming a limit no engine has are reported
// and left runnable; the rest of the queue runs.
func TestRateLimitUnknownName(t *testing.T) {
	t.Parallel()
	s, ev := newStarts(), &rlEvents{}
	fsm := rlFSM(t, s)
	b := setup(t, rlConfig(fsm, ev, map[string]durable.RateLimit{"known": {Limit: 100}}))
	for range 3 {
		b.insert(t, fsm.With(rlState{Key: "mystery"}), &durable.InsertOpts{RateLimit: "mystery:x"})
	}
	var others []int64
	for range 5 {
		others = append(others, b.insert(t, fsm.With(rlState{Key: "free"}), &durable.InsertOpts{Priority: 1}))
		others = append(others, b.insert(t, fsm.With(rlState{Key: "known"}), &durable.InsertOpts{Priority: 1, RateLimit: "known"}))
	}
	b.start(t)
	for _, id := range others {
		b.waitStatus(t, id, durable.StatusDone)
	}
	waitFor(t, "a RateLimitUnknown event", func() bool { _, u := ev.get(); return len(u) > 0 })
	time.Sleep(150 * time.Millisecond) // a few more polls
	_, unknown := ev.get()
	want := durable.RateLimitUnknownEvent{Queue: durable.DefaultQueue, Key: "mystery:x", Name: "mystery", FSM: "rl", Step: "run", Count: 3}
	for _, e := range unknown {
		e.Worker = ""
		if e != want {
			t.Fatalf("unknown event %+v, want %+v", e, want)
		}
	}
	// At most one per poll interval (50ms) of the queue.
	if len(unknown) > 20 {
		t.Fatalf("%d unknown events in well under a second", len(unknown))
	}
	if n := s.count("mystery"); n != 0 {
		t.Fatalf("%d rows of an unknown limit ran", n)
	}
}

// TestRateLimitAcrossEngines: two engines on one database share one
// bucket; together they keep its rate. No more of the 60 rows start by
// any time than the bucket can have granted since before the engines
// started (checkRate), nor within any window than the 16 the two engines'
// 8 workers each can hold plus what the bucket grants in it
// (checkWindows): at least (60−16−4−1)/20 = 1.95 s from the first start
// to the last, whatever delays a loaded machine adds. They must all have
// started within 20 s (2.8 s at the full rate): a floor of (60−4)/20 =
// 2.8 tokens per second.
func TestRateLimitAcrossEngines(t *testing.T) {
	t.Parallel()
	s := newStarts()
	fsm := rlFSM(t, s)
	limits := map[string]durable.RateLimit{"api": {Limit: 20, Burst: 4}}
	b := setup(t, rlConfig(fsm, nil, limits))
	insertLimited(t, b, fsm, "api", 1, 60)
	second := newClient(t, newPool(t, b.url), rlConfig(fsm, nil, limits), &recorder{})
	from := time.Now()
	b.start(t)
	startClient(t, second)
	at := waitStarted(t, s, "api", 60, from, 20*time.Second)
	t.Logf("60 steps at 20/s with a burst of 4 on two engines: first %s, last %s after the engines' start",
		at[0].Sub(from).Round(time.Millisecond), at[59].Sub(from).Round(time.Millisecond))
	checkRate(t, from, at, 1, 20, 4, 1)
	checkWindows(t, at, 1, 20, 4, 16, 1)
}

// TestRateLimitInsertOptsRejected pins the insert-time checks of the key
// and the weight.
func TestRateLimitInsertOptsRejected(t *testing.T) {
	t.Parallel()
	fsm := rlFSM(t, newStarts())
	c, err := durable.NewClient(newPool(t, "postgres://127.0.0.1:1/none"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		opts  durable.InsertOpts
		field string
	}{
		"empty name":      {durable.InsertOpts{RateLimit: ":p"}, "InsertOpts.RateLimit"},
		"empty partition": {durable.InsertOpts{RateLimit: "api:"}, "InsertOpts.RateLimit"},
		"long":            {durable.InsertOpts{RateLimit: strings.Repeat("k", 256)}, "InsertOpts.RateLimit"},
		"negative weight": {durable.InsertOpts{RateLimit: "api", RateLimitWeight: -1}, "InsertOpts.RateLimitWeight"},
	} {
		_, err := c.Insert(context.Background(), fsm.With(rlState{}), &tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: error %v does not name %s", name, err, tc.field)
		}
	}
	if k := durable.RateLimitKey("tenant", "42"); k != "tenant:42" {
		t.Fatalf("RateLimitKey = %q", k)
	}
}

// TestRateLimitMigrationIsIdempotent runs migration 004 again on a
// migrated schema, as a team's own migration tool might.
func TestRateLimitMigrationIsIdempotent(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	sql, err := os.ReadFile("migrations/004_rate_limits.sql")
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		b.exec(t, string(sql))
	}
	if n := b.count(t, "SELECT count(*) FROM durable_rate_limit_bucket"); n != 0 {
		t.Fatalf("%d buckets in a fresh schema", n)
	}
}

// TestRateLimitRowInsertedWhileRunning: a running engine whose queue had
// no rate-limited rows picks one inserted later at once, not at its next
// poll.
func TestRateLimitRowInsertedWhileRunning(t *testing.T) {
	t.Parallel()
	s := newStarts()
	fsm := rlFSM(t, s)
	cfg := rlConfig(fsm, nil, map[string]durable.RateLimit{"api": {Limit: 100}})
	cfg.PollInterval = time.Minute
	b := setup(t, cfg)
	b.start(t)
	free := b.insert(t, fsm.With(rlState{Key: "free"}), nil)
	b.waitStatus(t, free, durable.StatusDone)
	start := time.Now()
	id := b.insert(t, fsm.With(rlState{Key: "api"}), &durable.InsertOpts{RateLimit: "api"})
	b.waitStatus(t, id, durable.StatusDone)
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("the rate-limited row took %s", d)
	}
}
