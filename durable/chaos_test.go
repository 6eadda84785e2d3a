package durable_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemgo/idem/durable"
)

// TestChaosSIGKILLedWorkers runs the engine in three real worker processes
// (internal/chaosworker, built by the test) on one database, inserts a few
// hundred instances of three FSMs (steps with effects, signals, children)
// and sends their signals while it SIGKILLs a random worker every few
// hundred milliseconds and starts it again, or now and then freezes one
// past its leases, for chaosFor; then the survivors finish the work. It
// checks what the engine promises across crashes and pauses:
//
//   - every instance ends, done or failed as its FSM says, within a bound;
//   - each outcome is committed once: a trigger logs every row that leaves
//     executing, and each instance's progress (its state's Seq) was
//     committed once per step, none twice, none skipped;
//   - each committed outcome was committed by the claim (lease fence) that
//     ran its step, once the step had ended, and the effect that step
//     recorded (keyed by instance and claim) is the one its state counts:
//     a frozen worker's steps, thawed after their rows were reaped and
//     run elsewhere, commit nothing;
//   - no two executions of one instance's steps overlap in time while both
//     hold their leases (a killed worker's executions end at its death at
//     the latest);
//   - every signal is consumed exactly once per dedup key, whether sent
//     before the instance parked or after, twice at once, or again later;
//   - a parent ends once, with exactly its children, after they have all
//     ended.
func TestChaosSIGKILLedWorkers(t *testing.T) {
	b := setup(t, nil)
	bin := buildChaosWorker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := b.pool.Exec(ctx, chaosSchemaSQL); err != nil {
		t.Fatal(err)
	}

	fleet := &chaosFleet{t: t, bin: bin, url: b.url, dir: t.TempDir(), killedAt: map[string]time.Time{}}
	t.Cleanup(fleet.killAll)
	for slot := range chaosWorkers {
		fleet.start(slot)
	}

	// The work: inserted at a steady pace during the first part of the
	// chaos, the signals instances signalled as they go.
	rng := rand.New(rand.NewPCG(1, 2))
	w := newChaosWork(t, b, rng)
	chaosEnd := time.Now().Add(chaosFor)
	var wg sync.WaitGroup
	wg.Go(func() { w.insertAll(ctx, chaosInsertFor) })
	wg.Go(func() { w.signalParked(ctx) })

	// The chaos: SIGKILL a random worker, start it again a moment later;
	// now and then freeze one instead (SIGSTOP) past its leases, and thaw
	// it (SIGCONT) later, as a long pause would: its steps go on, with the
	// rows they ran reaped and run elsewhere meanwhile.
	kills, freezes := 0, 0
	for time.Now().Before(chaosEnd) {
		time.Sleep(time.Duration(150+rng.IntN(300)) * time.Millisecond)
		fleet.thaw(false)
		slot := rng.IntN(chaosWorkers)
		if !fleet.slots[slot].frozenUntil.IsZero() {
			continue // left frozen until its thaw
		}
		if rng.IntN(4) == 0 {
			fleet.freeze(slot, chaosFreeze)
			freezes++
			continue
		}
		fleet.kill(slot)
		kills++
		time.Sleep(time.Duration(rng.IntN(200)) * time.Millisecond)
		fleet.start(slot)
	}
	fleet.thaw(true)

	// The survivors finish: every row ends within the bound.
	deadline := time.Now().Add(chaosSettle)
	for {
		live := b.count(t, `SELECT count(*) FROM durable_instance WHERE status NOT IN ('done', 'failed', 'cancelled')`)
		if live == 0 && w.finished() {
			break
		}
		if time.Now().After(deadline) {
			cancel()
			wg.Wait()
			fleet.stopAll()
			t.Fatalf("%d instances still live %s after the chaos ended (inserting or signalling done: %v):\n%s",
				live, chaosSettle, w.finished(), chaosLiveRows(t, b))
		}
		time.Sleep(100 * time.Millisecond)
	}
	wg.Wait()
	fleet.stopAll()

	c := loadChaos(t, b)
	c.checkEnds(t, w)
	c.checkCommits(t, fleet)
	outlived := c.checkOverlaps(t, fleet)
	c.checkSignals(t, b)
	t.Logf("%d kills, %d freezes, %d instances, %d executions (%d cut short by a kill, %d outliving their reaped lease), %d reaps, %d fenced commits",
		kills, freezes, len(c.rows), len(c.execs), c.unended, outlived, c.reaps, fleet.fenced())
}

// The chaos test's sizes and times.
const (
	chaosWorkers   = 3
	chaosFor       = 15 * time.Second // SIGKILLs
	chaosInsertFor = 10 * time.Second // inserts, from the start of the chaos
	chaosSettle    = 25 * time.Second // for every row to end, once the chaos is over
	chaosFreeze    = 3 * time.Second  // a frozen worker's pause: past its leases (2 s)
	chaosEffects   = 150
	chaosSignals   = 60
	chaosParents   = 20
	chaosKids      = 3
)

// chaosSchemaSQL makes the tables the worker records its steps in and a
// trigger that logs every row leaving executing: a commit, a reap or a
// hand-back, in the transaction that made it, with whether the execution
// of the claim that left had recorded its end by then (a step records it
// before it returns, and so before its outcome is committed).
const chaosSchemaSQL = `
CREATE TABLE chaos_exec (
    owner text NOT NULL, id bigint NOT NULL, claims bigint NOT NULL, attempt int NOT NULL,
    step text NOT NULL, start_ns bigint NOT NULL, end_ns bigint, cause text,
    PRIMARY KEY (owner, id, claims));
CREATE TABLE chaos_effect (
    id bigint NOT NULL, claims bigint NOT NULL, step text NOT NULL, amount int NOT NULL, owner text NOT NULL,
    PRIMARY KEY (id, claims));
CREATE TABLE chaos_transition (
    seq bigserial PRIMARY KEY, id bigint NOT NULL, old_owner text, old_claims bigint NOT NULL,
    old_step text NOT NULL, new_status text NOT NULL, old_state jsonb NOT NULL, new_state jsonb NOT NULL,
    reaped bool NOT NULL, ended bool NOT NULL, at_ns bigint NOT NULL DEFAULT (extract(epoch FROM clock_timestamp()) * 1e9)::bigint);
CREATE FUNCTION chaos_log() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.status = 'executing' AND NEW.status <> 'executing' THEN
        INSERT INTO chaos_transition (id, old_owner, old_claims, old_step, new_status, old_state, new_state, reaped, ended)
        VALUES (OLD.id, OLD.lease_owner, OLD.claims, OLD.step, NEW.status, OLD.state, NEW.state,
                NEW.reaped_claim IS DISTINCT FROM OLD.reaped_claim,
                EXISTS (SELECT 1 FROM chaos_exec e WHERE e.owner = OLD.lease_owner AND e.id = OLD.id
                                                     AND e.claims = OLD.claims AND e.end_ns IS NOT NULL));
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER chaos_log AFTER UPDATE ON durable_instance FOR EACH ROW EXECUTE FUNCTION chaos_log();`

// The states of the worker's FSMs (see internal/chaosworker), and FSMs of
// the same names to insert them with.
type (
	chaosEffect struct {
		Seq    int      `json:"seq"`
		Total  int      `json:"total"`
		Steps  []string `json:"steps"`
		FailAt string   `json:"fail_at,omitempty"`
		Flaky  bool     `json:"flaky,omitempty"`
	}
	chaosSignalsState struct {
		Seq  int      `json:"seq"`
		Want int      `json:"want"`
		Got  []string `json:"got"`
	}
	chaosParent struct {
		Seq  int           `json:"seq"`
		Kids []chaosEffect `json:"kids"`
	}
	chaosParentResult struct {
		Done   int `json:"done"`
		Failed int `json:"failed"`
	}
)

// chaosAmount is the amount of the effect of step of instance id, as the
// worker's Amount computes it.
func chaosAmount(id int64, step string) int { return int(id%7) + int(step[0]-'a') + 1 }

// chaosSteps are the steps of the effect FSM, in order.
var chaosSteps = []string{"a", "b", "c"}

// chaosPayloads are the signals each signals instance gets, one per dedup
// key ("k1" for "p1"...); the duplicates carry other payloads.
var chaosPayloads = []string{"p1", "p2", "p3", "p4"}

// insertOnly is a step for the FSMs the test inserts with and never runs.
func insertOnly[S any](context.Context, *durable.Step[S]) (durable.Outcome, error) {
	return durable.Outcome{}, errors.New("run by the chaos worker only")
}

// buildChaosWorker builds internal/chaosworker, with the race detector
// when the test has it.
func buildChaosWorker(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "chaosworker")
	args := []string{"build", "-o", bin}
	if chaosRace {
		args = append(args, "-race")
	}
	out, err := exec.Command("go", append(args, "./internal/chaosworker")...).CombinedOutput()
	if err != nil {
		t.Fatalf("building the chaos worker: %v\n%s", err, out)
	}
	return bin
}

// chaosProc is one worker process.
type chaosProc struct {
	id     string
	cmd    *exec.Cmd
	log    string
	done   chan struct{} // closed once it has exited
	killed bool          // SIGKILLed by the test
	// frozenUntil, when not zero, is when the test thaws the worker it
	// froze (SIGSTOP).
	frozenUntil time.Time
}

// chaosFleet runs the workers, one per slot, each start under a new
// engine ID, and keeps when each killed one was dead by.
type chaosFleet struct {
	t             *testing.T
	bin, url, dir string
	gen           int
	slots         [chaosWorkers]*chaosProc
	all           []*chaosProc
	killedAt      map[string]time.Time
}

// start starts a worker in slot.
func (f *chaosFleet) start(slot int) {
	f.t.Helper()
	f.gen++
	p := &chaosProc{id: fmt.Sprintf("chaos-%d-%d", slot, f.gen), done: make(chan struct{})}
	p.log = filepath.Join(f.dir, p.id+".log")
	out, err := os.Create(p.log)
	if err != nil {
		f.t.Fatal(err)
	}
	defer out.Close()
	p.cmd = exec.Command(f.bin, "-db", f.url, "-id", p.id)
	p.cmd.Stdout, p.cmd.Stderr = out, out
	// A race-built worker stopped with SIGTERM need not wait a second for
	// reports; races are reported all the same.
	p.cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
	if err := p.cmd.Start(); err != nil {
		f.t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	f.slots[slot] = p
	f.all = append(f.all, p)
}

// freeze stops the worker of slot (SIGSTOP) for d.
func (f *chaosFleet) freeze(slot int, d time.Duration) {
	p := f.slots[slot]
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		f.t.Errorf("SIGSTOP %s: %v", p.id, err)
		return
	}
	p.frozenUntil = time.Now().Add(d)
}

// thaw resumes (SIGCONT) the frozen workers whose pause is over, or all
// of them.
func (f *chaosFleet) thaw(all bool) {
	for _, p := range f.slots {
		if p.frozenUntil.IsZero() || !all && time.Now().Before(p.frozenUntil) {
			continue
		}
		if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			f.t.Errorf("SIGCONT %s: %v", p.id, err)
		}
		p.frozenUntil = time.Time{}
	}
}

// kill SIGKILLs the worker of slot and waits until it is dead.
func (f *chaosFleet) kill(slot int) {
	p := f.slots[slot]
	p.killed = true
	_ = p.cmd.Process.Kill()
	<-p.done
	f.killedAt[p.id] = time.Now()
}

// stopAll stops the running workers gracefully (SIGTERM) and checks that
// each exited cleanly (a race report fails a race-built one), and that
// each killed one died of the kill, not before.
func (f *chaosFleet) stopAll() {
	f.t.Helper()
	for _, p := range f.slots {
		if !p.killed {
			f.waitStarted(p)
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	for _, p := range f.all {
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			f.t.Errorf("worker %s did not stop within 30s of SIGTERM", p.id)
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		ws, _ := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
		switch {
		case p.killed && ws.Signaled() && ws.Signal() == syscall.SIGKILL:
		case !p.killed && ws.Exited() && ws.ExitStatus() == 0:
		default:
			f.t.Errorf("worker %s (killed by the test: %v) ended with %v; its output:\n%s", p.id, p.killed, p.cmd.ProcessState, f.output(p))
		}
	}
}

// waitStarted waits, up to 30 s, until p has said that its engine runs
// (and so handles SIGTERM), or has exited.
func (f *chaosFleet) waitStarted(p *chaosProc) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if out, _ := os.ReadFile(p.log); strings.Contains(string(out), "started\n") {
			return
		}
		select {
		case <-p.done:
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// killAll kills what still runs, when the test ends early.
func (f *chaosFleet) killAll() {
	for _, p := range f.all {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
}

// output is the tail of p's output.
func (f *chaosFleet) output(p *chaosProc) string {
	out, _ := os.ReadFile(p.log)
	if len(out) > 8000 {
		out = out[len(out)-8000:]
	}
	return string(out)
}

// fenced counts the commits the workers reported fenced off.
func (f *chaosFleet) fenced() int {
	n := 0
	for _, p := range f.all {
		out, _ := os.ReadFile(p.log)
		for line := range strings.Lines(string(out)) {
			if strings.HasPrefix(line, "fenced ") {
				n++
			}
		}
	}
	return n
}

// chaosWork is what the test inserts and signals.
type chaosWork struct {
	t       *testing.T
	b       *testBundle
	effect  *durable.FSM[chaosEffect]
	signals *durable.FSM[chaosSignalsState]
	parent  *durable.FSM[chaosParent]
	specs   []any // chaosEffect, chaosSignalsState or chaosParent, in insert order

	mu       sync.Mutex
	inserted map[int64]any // by id, the state inserted
	phase    map[int64]int // signals instances: 1 waiting to be parked for p3, 2 for p4, 3 done
	done     bool          // every instance inserted and every signal sent
	sends    sync.WaitGroup
}

func newChaosWork(t *testing.T, b *testBundle, rng *rand.Rand) *chaosWork {
	w := &chaosWork{
		t: t, b: b, inserted: map[int64]any{}, phase: map[int64]int{},
		effect: mustFSM(t, durable.FSMConfig[chaosEffect]{Name: "effect", Initial: "a",
			Steps: map[string]durable.StepFunc[chaosEffect]{"a": insertOnly[chaosEffect]}}),
		signals: mustFSM(t, durable.FSMConfig[chaosSignalsState]{Name: "signals", Initial: "start",
			Steps: map[string]durable.StepFunc[chaosSignalsState]{"start": insertOnly[chaosSignalsState]}}),
		parent: mustFSM(t, durable.FSMConfig[chaosParent]{Name: "parent", Initial: "fan",
			Steps: map[string]durable.StepFunc[chaosParent]{"fan": insertOnly[chaosParent]}}),
	}
	effect := func(i int) chaosEffect {
		e := chaosEffect{Flaky: i%5 == 0}
		switch i % 7 {
		case 3:
			e.FailAt = "b"
		case 5:
			e.FailAt = "c"
		}
		return e
	}
	for i := range chaosEffects {
		w.specs = append(w.specs, effect(i))
	}
	for range chaosSignals {
		w.specs = append(w.specs, chaosSignalsState{Want: len(chaosPayloads)})
	}
	for i := range chaosParents {
		p := chaosParent{}
		for k := range chaosKids {
			p.Kids = append(p.Kids, effect(i*chaosKids+k))
		}
		w.specs = append(w.specs, p)
	}
	rng.Shuffle(len(w.specs), func(i, j int) { w.specs[i], w.specs[j] = w.specs[j], w.specs[i] })
	return w
}

// insertAll inserts the instances evenly over d; each signals instance is
// sent p1 and p2 at once, before it can have parked, p2 twice at the same
// time and p1 again with another payload.
func (w *chaosWork) insertAll(ctx context.Context, d time.Duration) {
	defer func() {
		w.sends.Wait()
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	}()
	start, pace := time.Now(), d/time.Duration(len(w.specs))
	for i, spec := range w.specs {
		time.Sleep(time.Until(start.Add(time.Duration(i) * pace))) // on schedule, or at once when late
		var args durable.Args
		switch s := spec.(type) {
		case chaosEffect:
			args = w.effect.With(s)
		case chaosSignalsState:
			args = w.signals.With(s)
		case chaosParent:
			args = w.parent.With(s)
		}
		id, err := w.b.client.Insert(ctx, args, nil)
		if err != nil {
			w.t.Errorf("Insert: %v", err)
			return
		}
		w.mu.Lock()
		w.inserted[id] = spec
		w.mu.Unlock()
		if _, ok := spec.(chaosSignalsState); ok {
			w.sends.Go(func() {
				w.send(ctx, id, "p1", "k1", false)
				var twice sync.WaitGroup
				twice.Go(func() { w.send(ctx, id, "p2", "k2", false) })
				twice.Go(func() { w.send(ctx, id, "p2", "k2", false) })
				twice.Wait()
				w.send(ctx, id, "p1-dup", "k1", false)
				w.mu.Lock()
				w.phase[id] = 1
				w.mu.Unlock()
			})
		}
	}
}

// send signals "ping" with payload to instance id under dedupKey; an
// instance that may have ended (mayHaveEnded) may answer ErrNoTarget.
func (w *chaosWork) send(ctx context.Context, id int64, payload, dedupKey string, mayHaveEnded bool) {
	err := w.b.client.Signal(ctx, durable.ByID(id), "ping", payload, dedupKey)
	if err != nil && !(mayHaveEnded && errors.Is(err, durable.ErrNoTarget)) {
		w.t.Errorf("Signal(%d, %q, %q): %v", id, payload, dedupKey, err)
	}
}

// signalParked sends each signals instance, once it is seen parked, p3
// (and a duplicate), and once it is seen parked again p4 (and duplicates
// of p2 and p4), until every instance has had its signals.
func (w *chaosWork) signalParked(ctx context.Context) {
	for ctx.Err() == nil {
		w.mu.Lock()
		var waiting []int64
		for id, ph := range w.phase {
			if ph == 1 || ph == 2 {
				waiting = append(waiting, id)
			}
		}
		all := w.done && len(waiting) == 0
		w.mu.Unlock()
		if all {
			return
		}
		rows, err := w.b.pool.Query(ctx, `
SELECT id, status FROM durable_instance
WHERE id = ANY($1) AND status IN ('awaiting_signal', 'done', 'failed', 'cancelled')`, waiting)
		var seen []chaosStatus
		if err == nil {
			seen, err = pgx.CollectRows(rows, pgx.RowToStructByPos[chaosStatus])
		}
		if err != nil {
			if ctx.Err() == nil {
				w.t.Errorf("reading the parked instances: %v", err)
			}
			return
		}
		for _, in := range seen {
			w.mu.Lock()
			ph := w.phase[in.ID]
			w.phase[in.ID] = ph + 1
			if in.Status.Terminal() {
				w.phase[in.ID] = 3
			}
			w.mu.Unlock()
			switch {
			case in.Status.Terminal():
				w.t.Errorf("signals instance %d ended (%s) before it was sent p%d: it consumed another signal, or one twice", in.ID, in.Status, ph+2)
			case ph == 1:
				w.send(ctx, in.ID, "p3", "k3", false)
				w.send(ctx, in.ID, "p3-dup", "k3", false)
			default:
				w.send(ctx, in.ID, "p2-dup", "k2", false)
				w.send(ctx, in.ID, "p4", "k4", false)
				w.send(ctx, in.ID, "p4-dup", "k4", true)
			}
		}
		time.Sleep(30 * time.Millisecond)
	}
}

// chaosStatus is an instance's status.
type chaosStatus struct {
	ID     int64
	Status durable.Status
}

// finished reports whether every instance was inserted and signalled.
func (w *chaosWork) finished() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		return false
	}
	for _, ph := range w.phase {
		if ph != 3 {
			return false
		}
	}
	return true
}

// chaosLiveRows describes the rows still live, for a failure.
func chaosLiveRows(t *testing.T, b *testBundle) string {
	rows, err := b.pool.Query(context.Background(), `
SELECT format('%s %s step %s %s attempt %s owner %s reaps %s error %s', id, fsm, step, status, attempt,
              coalesce(lease_owner, '-'), reaps, coalesce(error, '-'))
FROM durable_instance WHERE status NOT IN ('done', 'failed', 'cancelled') ORDER BY id LIMIT 30`)
	if err != nil {
		return err.Error()
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err.Error()
	}
	return strings.Join(lines, "\n")
}

// chaosRow is an instance as the test reads it back.
type chaosRow struct {
	id       int64
	fsm      string
	status   durable.Status
	state    json.RawMessage
	result   json.RawMessage
	err      string
	parentID int64
}

// chaosTransition is one row leaving executing, as the trigger logged it.
type chaosTransition struct {
	id                 int64
	oldOwner           string
	oldClaims          int64
	oldStep, newStatus string
	oldSeq, newSeq     int
	oldTotal, newTotal int
	reaped             bool
	ended              bool  // the claim's execution had ended
	at                 int64 // Unix nanoseconds
}

// chaosExec is one execution of a step, as the worker recorded it.
type chaosExec struct {
	owner      string
	id, claims int64
	step       string
	start, end int64  // Unix nanoseconds; end 0 when the worker died first
	cause      string // why its context was cancelled, if it was
}

// chaosResults is everything the checks read.
type chaosResults struct {
	rows        map[int64]chaosRow
	transitions []chaosTransition
	execs       []chaosExec
	effects     map[[2]int64]chaosEffectRow // by id and claims
	unended     int                         // executions with no recorded end
	reaps       int
}

type chaosEffectRow struct {
	step   string
	amount int
}

func loadChaos(t *testing.T, b *testBundle) *chaosResults {
	t.Helper()
	ctx := ctxT(t)
	c := &chaosResults{rows: map[int64]chaosRow{}, effects: map[[2]int64]chaosEffectRow{}}
	rows, err := b.pool.Query(ctx, `SELECT id, fsm, status, state, result, coalesce(error, ''), coalesce(parent_id, 0) FROM durable_instance`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var r chaosRow
		if err := rows.Scan(&r.id, &r.fsm, &r.status, &r.state, &r.result, &r.err, &r.parentID); err != nil {
			t.Fatal(err)
		}
		c.rows[r.id] = r
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows, err = b.pool.Query(ctx, `
SELECT id, coalesce(old_owner, ''), old_claims, old_step, new_status,
       coalesce((old_state->>'seq')::int, 0), coalesce((new_state->>'seq')::int, 0),
       coalesce((old_state->>'total')::int, 0), coalesce((new_state->>'total')::int, 0), reaped, ended, at_ns
FROM chaos_transition ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var x chaosTransition
		if err := rows.Scan(&x.id, &x.oldOwner, &x.oldClaims, &x.oldStep, &x.newStatus,
			&x.oldSeq, &x.newSeq, &x.oldTotal, &x.newTotal, &x.reaped, &x.ended, &x.at); err != nil {
			t.Fatal(err)
		}
		if x.reaped {
			c.reaps++
		}
		c.transitions = append(c.transitions, x)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows, err = b.pool.Query(ctx, `SELECT owner, id, claims, step, start_ns, coalesce(end_ns, 0), coalesce(cause, '') FROM chaos_exec`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var e chaosExec
		if err := rows.Scan(&e.owner, &e.id, &e.claims, &e.step, &e.start, &e.end, &e.cause); err != nil {
			t.Fatal(err)
		}
		if e.end == 0 {
			c.unended++
		}
		c.execs = append(c.execs, e)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows, err = b.pool.Query(ctx, `SELECT id, claims, step, amount FROM chaos_effect`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, claims int64
		var e chaosEffectRow
		if err := rows.Scan(&id, &claims, &e.step, &e.amount); err != nil {
			t.Fatal(err)
		}
		c.effects[[2]int64{id, claims}] = e
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return c
}

// checkEnds checks that every instance inserted, and every child, ended as
// its FSM says.
func (c *chaosResults) checkEnds(t *testing.T, w *chaosWork) {
	t.Helper()
	kids := map[int64][]chaosRow{}
	for _, r := range c.rows {
		if r.parentID != 0 {
			kids[r.parentID] = append(kids[r.parentID], r)
		}
	}
	if n := len(c.rows); n != len(w.inserted)+chaosParents*chaosKids {
		t.Errorf("%d instances, want %d inserted and %d children", n, len(w.inserted), chaosParents*chaosKids)
	}
	for _, r := range c.rows {
		spec, top := w.inserted[r.id]
		switch {
		case !top && r.parentID == 0:
			t.Errorf("instance %d (%s) was neither inserted nor a child", r.id, r.fsm)
		case r.fsm == "effect":
			var s chaosEffect
			if err := json.Unmarshal(r.state, &s); err != nil {
				t.Fatalf("state of %d: %v", r.id, err)
			}
			if top && s.FailAt != spec.(chaosEffect).FailAt {
				t.Errorf("effect %d: state %s, inserted %+v", r.id, r.state, spec)
			}
			checkEffectEnd(t, r, s)
		case r.fsm == "signals":
			var got []string
			if r.status != durable.StatusDone || json.Unmarshal(r.result, &got) != nil {
				t.Errorf("signals %d: %s with result %s (%s), want done", r.id, r.status, r.result, r.err)
				continue
			}
			slices.Sort(got)
			if !slices.Equal(got, chaosPayloads) {
				t.Errorf("signals %d consumed %q, want each of %q once", r.id, got, chaosPayloads)
			}
		case r.fsm == "parent":
			var want chaosParentResult
			for _, k := range spec.(chaosParent).Kids {
				if k.FailAt == "" {
					want.Done++
				} else {
					want.Failed++
				}
			}
			var got, fates chaosParentResult
			for _, k := range kids[r.id] {
				switch k.status {
				case durable.StatusDone:
					fates.Done++
				case durable.StatusFailed:
					fates.Failed++
				}
			}
			if r.status != durable.StatusDone || json.Unmarshal(r.result, &got) != nil || got != want || fates != want {
				t.Errorf("parent %d: %s with result %s (%s), children %+v; want done with %+v",
					r.id, r.status, r.result, r.err, fates, want)
			}
		default:
			t.Errorf("instance %d of FSM %q", r.id, r.fsm)
		}
	}
}

// checkEffectEnd checks that effect instance r, with state s, ended as
// its FailAt says, with the effects of the steps before.
func checkEffectEnd(t *testing.T, r chaosRow, s chaosEffect) {
	t.Helper()
	steps, total := chaosSteps, 0
	if i := slices.Index(chaosSteps, s.FailAt); i >= 0 {
		steps = chaosSteps[:i]
	}
	for _, st := range steps {
		total += chaosAmount(r.id, st)
	}
	wantStatus, wantErr := durable.StatusDone, ""
	if s.FailAt != "" {
		wantStatus, wantErr = durable.StatusFailed, "planned failure at "+s.FailAt
	}
	if r.status != wantStatus || r.err != wantErr || !slices.Equal(s.Steps, steps) || s.Total != total {
		t.Errorf("effect %d: %s (%q) with state %s; want %s (%q) after steps %q, total %d",
			r.id, r.status, r.err, r.state, wantStatus, wantErr, steps, total)
	}
	if wantStatus == durable.StatusDone && string(r.result) != fmt.Sprint(total) {
		t.Errorf("effect %d: result %s, want %d", r.id, r.result, total)
	}
}

// checkCommits checks the log of rows leaving executing: each instance's
// progress committed once per step, in order, each by a claim whose step
// had run to its end when it was committed and, for the effect FSM, with
// the effect that claim recorded.
func (c *chaosResults) checkCommits(t *testing.T, f *chaosFleet) {
	t.Helper()
	execs := map[chaosExecKey]chaosExec{}
	for _, e := range c.execs {
		execs[chaosExecKey{e.owner, e.id, e.claims}] = e
	}
	seqs := map[int64][]int{}
	for _, x := range c.transitions {
		switch {
		case x.newSeq == x.oldSeq:
			continue // a reap, a hand-back or a retry: no progress
		case x.reaped || x.newSeq != x.oldSeq+1:
			t.Errorf("instance %d: a transition from seq %d to %d (reaped: %v)", x.id, x.oldSeq, x.newSeq, x.reaped)
			continue
		}
		seqs[x.id] = append(seqs[x.id], x.newSeq)
		e, ok := execs[chaosExecKey{x.oldOwner, x.id, x.oldClaims}]
		if !ok || !x.ended || e.step != x.oldStep {
			t.Errorf("instance %d: step %s committed (to seq %d) under claim %d of %s, whose execution of it had not ended (%+v); its history:\n%s",
				x.id, x.oldStep, x.newSeq, x.oldClaims, x.oldOwner, e, c.history(x.id, f))
		}
		if c.rows[x.id].fsm != "effect" || x.newStatus == string(durable.StatusFailed) {
			continue
		}
		eff, ok := c.effects[[2]int64{x.id, x.oldClaims}]
		if want := chaosAmount(x.id, x.oldStep); !ok || eff.step != x.oldStep || eff.amount != want || x.newTotal-x.oldTotal != want {
			t.Errorf("instance %d: step %s committed under claim %d adding %d to the total; its effect %+v (recorded: %v), want %d",
				x.id, x.oldStep, x.oldClaims, x.newTotal-x.oldTotal, eff, ok, want)
		}
	}
	for id, r := range c.rows {
		var seq struct {
			Seq int `json:"seq"`
		}
		if err := json.Unmarshal(r.state, &seq); err != nil {
			t.Fatalf("state of %d: %v", id, err)
		}
		want := make([]int, seq.Seq)
		for i := range want {
			want[i] = i + 1
		}
		if got := seqs[id]; !slices.Equal(got, want) {
			t.Errorf("instance %d (%s): progress committed as seqs %v, want %v", id, r.fsm, got, want)
		}
	}
}

type chaosExecKey struct {
	owner      string
	id, claims int64
}

// checkOverlaps checks that no two executions of one instance's steps ran
// at once while both held their leases: each ended before the next began
// (an execution cut short by the SIGKILL of its worker ended when the
// worker was dead at the latest), unless the reaper had taken its lease
// back, its worker having been paused past the lease (on a loaded
// machine a process is, for seconds at times): no lease can stop a
// paused process, and the engine's answer is the fence, checked by
// checkCommits, which such an execution's outcome met. It returns how
// many executions so outlived their leases.
func (c *chaosResults) checkOverlaps(t *testing.T, f *chaosFleet) (outlived int) {
	t.Helper()
	reaped := map[[2]int64]bool{}
	for _, x := range c.transitions {
		if x.reaped {
			reaped[[2]int64{x.id, x.oldClaims}] = true
		}
	}
	byID := map[int64][]chaosExec{}
	for _, e := range c.execs {
		if e.end == 0 {
			at, ok := f.killedAt[e.owner]
			if !ok {
				t.Errorf("instance %d: the execution of step %s by %s under claim %d never ended, and its worker was not killed; its history:\n%s",
					e.id, e.step, e.owner, e.claims, c.history(e.id, f))
				continue
			}
			e.end = at.UnixNano()
		}
		byID[e.id] = append(byID[e.id], e)
	}
	for id, es := range byID {
		slices.SortFunc(es, func(a, b chaosExec) int { return cmp.Compare(a.start, b.start) })
		for i := 1; i < len(es); i++ {
			prev, next := es[i-1], es[i]
			if prev.end <= next.start {
				continue
			}
			if prev.claims < next.claims && reaped[[2]int64{id, prev.claims}] {
				outlived++
				continue
			}
			t.Errorf("instance %d: step %s by %s (claim %d) ran on %s past the start of step %s by %s (claim %d); its history:\n%s",
				id, prev.step, prev.owner, prev.claims, time.Duration(prev.end-next.start), next.step, next.owner, next.claims,
				c.history(id, f))
		}
	}
	return outlived
}

// checkSignals checks that no signal is left in an inbox and that each
// signals instance received each dedup key once.
func (c *chaosResults) checkSignals(t *testing.T, b *testBundle) {
	t.Helper()
	if n := b.count(t, `SELECT count(*) FROM durable_signal`); n != 0 {
		t.Errorf("%d signals left in the inboxes of ended instances", n)
	}
	if n := b.count(t, `SELECT count(DISTINCT instance_id) FROM durable_signal_dedup`); n != chaosSignals {
		t.Errorf("dedup keys for %d instances, want %d", n, chaosSignals)
	}
	if n := b.count(t, `SELECT count(*) FROM (SELECT instance_id FROM durable_signal_dedup GROUP BY instance_id HAVING count(*) <> $1) x`,
		len(chaosPayloads)); n != 0 {
		t.Errorf("%d instances without exactly %d dedup keys", n, len(chaosPayloads))
	}
}

// history describes what happened to instance id, in time order: the
// executions of its steps and its rows leaving executing, for a failure.
func (c *chaosResults) history(id int64, f *chaosFleet) string {
	type event struct {
		at   int64
		what string
	}
	var evs []event
	var base int64
	for _, e := range c.execs {
		if e.id != id {
			continue
		}
		end := "no recorded end"
		if e.end != 0 {
			end = fmt.Sprintf("ended +%s", time.Duration(e.end-e.start))
		}
		if at, ok := f.killedAt[e.owner]; ok {
			end += fmt.Sprintf(", its worker dead by +%s", time.Duration(at.UnixNano()-e.start))
		}
		if e.cause != "" {
			end += ", cancelled: " + e.cause
		}
		evs = append(evs, event{e.start, fmt.Sprintf("%s runs step %s under claim %d (%s)", e.owner, e.step, e.claims, end)})
	}
	for _, x := range c.transitions {
		if x.id == id {
			evs = append(evs, event{x.at, fmt.Sprintf("claim %d of %s at step %s leaves executing for %s (seq %d to %d, reaped: %v)",
				x.oldClaims, x.oldOwner, x.oldStep, x.newStatus, x.oldSeq, x.newSeq, x.reaped)})
		}
	}
	slices.SortFunc(evs, func(a, b event) int { return cmp.Compare(a.at, b.at) })
	var out strings.Builder
	for _, e := range evs {
		if base == 0 {
			base = e.at
		}
		fmt.Fprintf(&out, "  +%-12s %s\n", time.Duration(e.at-base), e.what)
	}
	for _, p := range f.all {
		for line := range strings.Lines(f.output(p)) {
			if strings.Contains(line, fmt.Sprintf("id=%d ", id)) || strings.HasPrefix(line, fmt.Sprintf("fenced %d ", id)) {
				fmt.Fprintf(&out, "  %s said: %s", p.id, line)
			}
		}
	}
	return out.String()
}
