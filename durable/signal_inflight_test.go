package durable_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/idemgo/idem/durable"
)

// A step runs on the inbox as its claim read it. Signals that arrive
// between that claim and the step's fenced commit are neither lost nor
// consumed unseen: Await and Next consume only the awaited signals the
// step saw, Retry none, so the late ones are handed to a later step, and
// an Await that names them wakes at once. Done deletes the inbox, late
// signals included, as it deletes the rest: no step of an ended instance
// would ever see them.
func TestSignalsArrivingWhileAStepRunsReachALaterStep(t *testing.T) {
	t.Parallel()
	type relayState struct {
		Log []string `json:"log"`
	}
	at, resume := make(chan string), make(chan struct{})
	pause := func(name string) { at <- name; <-resume }
	seen := func(sigs []durable.Signal) string {
		var out []string
		for _, s := range sigs {
			var p string
			_ = json.Unmarshal(s.Payload, &p)
			out = append(out, s.Name+"="+p)
		}
		return strings.Join(out, ",")
	}
	fsm := mustFSM(t, durable.FSMConfig[relayState]{
		Name: "relay", Initial: "start",
		Steps: map[string]durable.StepFunc[relayState]{
			"start": func(context.Context, *durable.Step[relayState]) (durable.Outcome, error) {
				return durable.Await("first", "a"), nil
			},
			"first": func(_ context.Context, s *durable.Step[relayState]) (durable.Outcome, error) {
				s.State.Log = append(s.State.Log, "first saw "+seen(s.Awaited))
				pause("first")
				return durable.Await("second", "a"), nil
			},
			"second": func(_ context.Context, s *durable.Step[relayState]) (durable.Outcome, error) {
				s.State.Log = append(s.State.Log, fmt.Sprintf("second#%d saw %s", s.Attempt, seen(s.Awaited)))
				if s.Attempt == 1 {
					pause("second")
					return durable.Retry(0), nil
				}
				return durable.Next("third"), nil
			},
			"third": func(_ context.Context, s *durable.Step[relayState]) (durable.Outcome, error) {
				s.State.Log = append(s.State.Log, "third pending "+seen(s.Pending))
				return durable.Await("fourth", "b"), nil
			},
			"fourth": func(_ context.Context, s *durable.Step[relayState]) (durable.Outcome, error) {
				s.State.Log = append(s.State.Log, "fourth saw "+seen(s.Awaited))
				pause("fourth")
				return durable.Done(s.State.Log), nil
			},
		},
	})
	b := setup(t, fast(fsm))
	b.start(t)

	id := b.insert(t, fsm.With(relayState{}), nil)
	step := func(want string, signals ...string) {
		t.Helper()
		if got := <-at; got != want {
			t.Fatalf("step %q paused, want %q", got, want)
		}
		for _, s := range signals {
			name, payload, _ := strings.Cut(s, "=")
			b.signal(t, durable.ByID(id), name, payload, "")
		}
		resume <- struct{}{}
	}
	b.waitStatus(t, id, durable.StatusAwaitingSignal)
	b.signal(t, durable.ByID(id), "a", "1", "")
	step("first", "a=2", "b=x")  // its Await consumes a=1 only, and a=2 wakes it at once
	step("second", "a=3")        // Retry consumes nothing
	step("fourth", "c=too late") // Done deletes the whole inbox

	in := b.waitStatus(t, id, durable.StatusDone)
	var log []string
	if err := json.Unmarshal(in.Result, &log); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"first saw a=1",
		"second#1 saw a=2",
		"second#2 saw a=2,a=3",
		"third pending b=x",
		"fourth saw b=x",
	}
	if !slices.Equal(log, want) {
		t.Fatalf("what the steps saw:\n%s\nwant:\n%s", strings.Join(log, "\n"), strings.Join(want, "\n"))
	}
	if len(in.Inbox) != 0 {
		t.Fatalf("inbox of the done instance: %+v", in.Inbox)
	}
}
