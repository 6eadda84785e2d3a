package durable_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/idemgo/idem/durable"
)

// A signal payload or a state that is small as sent, within
// Config.MaxPayload, can be huge as PostgreSQL writes it back: jsonb keeps
// 1e131071 as a numeric, and prints it with its 131072 digits. A claim
// reads each row's state and inbox as JSON, and one value of over 1 GiB
// failed the claims of the whole queue, for good. Such documents are
// measured as printed, and refused at the door; the queue runs on.
func TestInboxHugeAsRenderedDoesNotStallItsQueue(t *testing.T) {
	t.Parallel()
	b, ctl, huge, other := twoAwaitingSignals(t)

	// 81 KB as sent; 1.2 GB as PostgreSQL prints it.
	numbers := "[" + strings.Repeat("1e131071,", 8999) + "1e131071]"
	err := b.client.Signal(ctxT(t), durable.ByID(huge), "noise", json.RawMessage(numbers), "")
	if !errors.Is(err, durable.ErrPayloadTooLarge) {
		t.Errorf("Signal of a payload of 1.2 GB as printed: %v, want ErrPayloadTooLarge", err)
	}
	_, err = b.client.Insert(ctxT(t), ctl.With(ctlState{Seen: []string{numbers}}), nil)
	if err != nil {
		t.Fatalf("a string of numbers is its own length: %v", err)
	}
	fsm := mustFSM(t, durable.FSMConfig[json.RawMessage]{Name: "raw", Initial: "start",
		Steps: map[string]durable.StepFunc[json.RawMessage]{
			"start": func(ctx context.Context, s *durable.Step[json.RawMessage]) (durable.Outcome, error) {
				return durable.Done(nil), nil
			},
		}})
	if _, err := b.client.Insert(ctxT(t), fsm.With(json.RawMessage(numbers)), nil); !errors.Is(err, durable.ErrPayloadTooLarge) {
		t.Errorf("Insert of a state of 1.2 GB as printed: %v, want ErrPayloadTooLarge", err)
	}
	b.signal(t, durable.ByID(huge), "go", 1, "")
	b.signal(t, durable.ByID(other), "finish", 2, "")
	b.waitStatus(t, other, durable.StatusDone)
}
