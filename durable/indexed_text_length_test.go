package durable_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/idemgo/idem/durable"
)

// TestOverlongIndexedTextIsUnstorable pins that text longer than the
// indexes that hold it can take (a correlation or concurrency key, a
// signal name, a dedup key: over 2048 bytes) is ErrUnstorable, caught
// before anything is sent: Insert and Signal fail with it, the caller's
// transaction of SignalTx stays usable, and an Await on such a name,
// which no Signal could ever deliver, is a step error rather than an
// instance parked for good.
func TestOverlongIndexedTextIsUnstorable(t *testing.T) {
	t.Parallel()
	long := incompressible(4000)
	fsm := mustFSM(t, durable.FSMConfig[string]{Name: "overlong", Initial: "a", MaxAttempts: 1, Steps: map[string]durable.StepFunc[string]{
		"a": func(_ context.Context, s *durable.Step[string]) (durable.Outcome, error) {
			if s.State == "await" {
				return durable.Await("a", long), nil
			}
			return durable.Await("a", "x"), nil
		},
	}})
	b := setup(t, fast(fsm))
	ctx := ctxT(t)
	id := b.insert(t, fsm.With("ok"), nil)
	for what, call := range map[string]func() error{
		"correlation key": func() error {
			_, err := b.client.Insert(ctx, fsm.With("x"), &durable.InsertOpts{CorrelationKey: long})
			return err
		},
		"concurrency key": func() error {
			_, err := b.client.Insert(ctx, fsm.With("x"), &durable.InsertOpts{ConcurrencyKey: long})
			return err
		},
		"signal name": func() error { return b.client.Signal(ctx, durable.ByID(id), long, nil, "") },
		"dedup key":   func() error { return b.client.Signal(ctx, durable.ByID(id), "x", nil, long) },
		"InsertOrSignal name": func() error {
			_, _, err := b.client.InsertOrSignal(ctx, fsm.With("x"), &durable.InsertOpts{CorrelationKey: "k"}, long, nil, "")
			return err
		},
		"SignalTx": func() error {
			var sigErr error
			err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
				sigErr = b.client.SignalTx(ctx, tx, durable.ByID(id), long, nil, "")
				var one int
				return tx.QueryRow(ctx, "SELECT 1").Scan(&one)
			})
			if err != nil {
				t.Errorf("the transaction of SignalTx is no longer usable: %v", err)
			}
			return sigErr
		},
	} {
		if err := call(); !errors.Is(err, durable.ErrUnstorable) {
			t.Errorf("%s of %d bytes: %v, want ErrUnstorable", what, len(long), err)
		}
	}
	if n := b.count(t, "SELECT count(*) FROM durable_instance"); n != 1 {
		t.Errorf("%d instances, want the first one only", n)
	}
	if n := b.count(t, "SELECT count(*) FROM durable_signal"); n != 0 {
		t.Errorf("%d signals stored", n)
	}
	b.start(t)
	parked := b.insert(t, fsm.With("await"), nil)
	if in := b.waitStatus(t, parked, durable.StatusFailed); !strings.Contains(in.Error, durable.ErrUnstorable.Error()) {
		t.Errorf("an Await on a %d-byte name failed with %q, want ErrUnstorable's", len(long), in.Error)
	}
}
