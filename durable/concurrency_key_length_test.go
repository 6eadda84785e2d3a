package durable_test

import (
	"context"
	"crypto/rand"
	"strings"
	"testing"

	"github.com/idemgo/idem/durable"
)

// incompressible returns n bytes of random lowercase letters, which
// PostgreSQL cannot compress to fit an index row.
func incompressible(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = 'a' + b[i]%26
	}
	return string(b)
}

// TestLongConcurrencyKeyIsRejectedNotStalled pins that Insert rejects a
// ConcurrencyKey longer than the index of executing rows can hold, and that
// every key it accepts can be claimed. A longer key used to be inserted,
// and then every claim of its queue failed on the index as it leased the
// row: no row of the queue ran again.
func TestLongConcurrencyKeyIsRejectedNotStalled(t *testing.T) {
	t.Parallel()
	fsm := mustFSM(t, durable.FSMConfig[string]{Name: "longkey", Initial: "a", Steps: map[string]durable.StepFunc[string]{
		"a": func(context.Context, *durable.Step[string]) (durable.Outcome, error) { return durable.Done(nil), nil },
	}})
	b := setup(t, fast(fsm))
	ctx := ctxT(t)
	long := incompressible(4000)
	if _, err := b.client.Insert(ctx, fsm.With("long"), &durable.InsertOpts{ConcurrencyKey: long}); err == nil ||
		!strings.Contains(err.Error(), "InsertOpts.ConcurrencyKey") {
		t.Errorf("Insert with a %d-byte concurrency key: %v, want an error naming InsertOpts.ConcurrencyKey", len(long), err)
	}
	if _, err := b.client.InsertAll(ctx, []durable.InsertParams{{Args: fsm.With("long"), Opts: &durable.InsertOpts{ConcurrencyKey: long}}}); err == nil {
		t.Errorf("InsertAll with a %d-byte concurrency key succeeded", len(long))
	}
	if n := b.count(t, "SELECT count(*) FROM durable_instance"); n != 0 {
		t.Fatalf("%d rows inserted", n)
	}
	longest := b.insert(t, fsm.With("longest"), &durable.InsertOpts{ConcurrencyKey: incompressible(durable.MaxConcurrencyKey)})
	other := b.insert(t, fsm.With("other"), nil)
	b.start(t)
	b.waitStatus(t, longest, durable.StatusDone)
	b.waitStatus(t, other, durable.StatusDone)
}
