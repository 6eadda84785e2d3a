package durable_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/idemgo/idem/durable"
)

// verState records, in the row, which version's step bodies ran.
type verState struct {
	Ran []string `json:"ran,omitempty"`
}

// verLog records, outside the rows, which version's step bodies ran.
type verLog struct {
	mu  sync.Mutex
	ran []string
}

func (l *verLog) add(s string) {
	l.mu.Lock()
	l.ran = append(l.ran, s)
	l.mu.Unlock()
}

func (l *verLog) snapshot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.ran...)
}

func (l *verLog) has(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.ran {
		if r == s {
			return true
		}
	}
	return false
}

// verFSM is version v of FSM "ver": same name, same step names, different
// bodies. "start" records "v<v>:start" and parks awaiting "go"; "got"
// records "v<v>:got" and ends done with the record as result.
func verFSM(t testing.TB, v int, log *verLog) *durable.FSM[verState] {
	tag := "v" + string(rune('0'+v))
	return mustFSM(t, durable.FSMConfig[verState]{
		Name:    "ver",
		Version: v,
		Initial: "start",
		Steps: map[string]durable.StepFunc[verState]{
			"start": func(ctx context.Context, s *durable.Step[verState]) (durable.Outcome, error) {
				log.add(tag + ":start")
				s.State.Ran = append(s.State.Ran, tag+":start")
				return durable.Await("got", "go"), nil
			},
			"got": func(ctx context.Context, s *durable.Step[verState]) (durable.Outcome, error) {
				log.add(tag + ":got")
				s.State.Ran = append(s.State.Ran, tag+":got")
				return durable.Done(s.State.Ran), nil
			},
		},
	})
}

func resultOf(t *testing.T, in *durable.Instance) []string {
	t.Helper()
	var ran []string
	if err := json.Unmarshal(in.Result, &ran); err != nil {
		t.Fatalf("result %s: %v", in.Result, err)
	}
	return ran
}

func TestVersionsSideBySide(t *testing.T) {
	log := &verLog{}
	v1, v2 := verFSM(t, 1, log), verFSM(t, 2, log)

	// An engine of the old release, with v1 only, starts an instance.
	b := setup(t, fast(v1))
	b.start(t)
	old := b.insert(t, v1.With(verState{}), nil)
	b.waitStatus(t, old, durable.StatusAwaitingSignal)
	if err := b.client.Stop(ctxT(t)); err != nil {
		t.Fatal(err)
	}

	// The new release registers both; new instances are inserted as v2.
	c := newClient(t, b.pool, fast(v1, v2), &recorder{})
	startClient(t, c)
	nb := &testBundle{url: b.url, pool: b.pool, client: c, events: b.events}
	fresh := nb.insert(t, v2.With(verState{}), nil)
	nb.waitStatus(t, fresh, durable.StatusAwaitingSignal)

	nb.signal(t, durable.ByID(old), "go", nil, "")
	nb.signal(t, durable.ByID(fresh), "go", nil, "")
	oldIn := nb.waitStatus(t, old, durable.StatusDone)
	freshIn := nb.waitStatus(t, fresh, durable.StatusDone)

	if oldIn.Version != 1 || freshIn.Version != 2 {
		t.Fatalf("versions: old %d, fresh %d; want 1 and 2", oldIn.Version, freshIn.Version)
	}
	if got := strings.Join(resultOf(t, oldIn), ","); got != "v1:start,v1:got" {
		t.Errorf("v1 instance ran %s, want v1:start,v1:got", got)
	}
	if got := strings.Join(resultOf(t, freshIn), ","); got != "v2:start,v2:got" {
		t.Errorf("v2 instance ran %s, want v2:start,v2:got", got)
	}
	if !log.has("v1:got") || !log.has("v2:start") || !log.has("v2:got") {
		t.Errorf("step bodies run: %v", log.snapshot())
	}
}

// An engine without an instance's version does not run another version's
// steps on it: it retries the row visibly (ErrUnknownFSM on the row, the
// state unchanged), so that an engine with the version can take it.
func TestVersionUnknownIsRetriedVisibly(t *testing.T) {
	log := &verLog{}
	v1, v2 := verFSM(t, 1, log), verFSM(t, 2, log)

	b := setup(t, fast(v2))
	id := b.insert(t, v1.With(verState{}), nil)
	b.start(t)
	var in *durable.Instance
	waitFor(t, "an attempt under ErrUnknownFSM", func() bool {
		in = b.get(t, id)
		return in.Attempt >= 2
	})
	if in.Status != durable.StatusRunnable || in.Version != 1 || in.Step != "start" {
		t.Fatalf("after an unknown version: status %s, version %d, step %q", in.Status, in.Version, in.Step)
	}
	if !strings.Contains(in.Error, durable.ErrUnknownFSM.Error()) || !strings.Contains(in.Error, "version 1") {
		t.Fatalf("Error %q, want ErrUnknownFSM naming version 1", in.Error)
	}
	if string(in.State) != "{}" {
		t.Fatalf("state changed to %s", in.State)
	}
	if log.has("v2:start") {
		t.Fatal("a v2 step ran on a v1 instance")
	}
	if err := b.client.Stop(ctxT(t)); err != nil {
		t.Fatal(err)
	}

	// An engine with v1 takes it over and runs it on v1.
	c := newClient(t, b.pool, fast(v1, v2), &recorder{})
	b.exec(t, "UPDATE durable_instance SET eligible_at = now() WHERE id = $1", id) // skip the backoff
	startClient(t, c)
	nb := &testBundle{url: b.url, pool: b.pool, client: c, events: b.events}
	nb.waitStatus(t, id, durable.StatusAwaitingSignal)
	nb.signal(t, durable.ByID(id), "go", nil, "")
	in = nb.waitStatus(t, id, durable.StatusDone)
	if got := strings.Join(resultOf(t, in), ","); got != "v1:start,v1:got" {
		t.Errorf("ran %s, want v1:start,v1:got", got)
	}
	if log.has("v2:start") {
		t.Error("a v2 step ran on a v1 instance")
	}
}
