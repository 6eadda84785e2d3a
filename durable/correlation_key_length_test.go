package durable_test

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemgo/idem/durable"
)

// TestLongCorrelationKeyIsAnErrorNotACommitLoop pins that a CorrelationKey
// longer than the index of keys can hold is rejected before anything is
// written: by Insert with an error naming the field, and in a Children
// outcome as a step error, handled by the error handling. Such a child
// used to fail the outcome's commit, every time its step ran again after
// the lease expired, until the parent was reaped too often.
func TestLongCorrelationKeyIsAnErrorNotACommitLoop(t *testing.T) {
	t.Parallel()
	leaf := leafFSM(t)
	long := incompressible(4000)
	var after atomic.Int32
	parent := parentFSM(t, func() []durable.InsertParams {
		return []durable.InsertParams{{Args: leaf.With(struct{}{}), Opts: &durable.InsertOpts{CorrelationKey: long}}}
	}, &after)
	b := setup(t, fast(leaf, parent))
	ctx := ctxT(t)
	if _, err := b.client.Insert(ctx, leaf.With(struct{}{}), &durable.InsertOpts{CorrelationKey: long}); err == nil ||
		!strings.Contains(err.Error(), "InsertOpts.CorrelationKey") {
		t.Errorf("Insert with a %d-byte correlation key: %v, want an error naming InsertOpts.CorrelationKey", len(long), err)
	}
	longest := b.insert(t, leaf.With(struct{}{}), &durable.InsertOpts{CorrelationKey: incompressible(durable.MaxCorrelationKey)})
	b.start(t)
	b.waitStatus(t, longest, durable.StatusDone)
	p := b.insert(t, parent.With(parentState{}), nil)
	waitFor(t, "the parent's step to fail", func() bool { return b.get(t, p).Attempt >= 2 })
	if in := b.get(t, p); !strings.Contains(in.Error, "InsertOpts.CorrelationKey") || in.Reaps != 0 {
		t.Errorf("parent after its Children outcome: %s, error %q, %d reaps; want the key's error and no reap", in.Status, in.Error, in.Reaps)
	}
	if n := b.count(t, "SELECT count(*) FROM durable_instance WHERE parent_id = $1", p); n != 0 {
		t.Errorf("%d children inserted", n)
	}
}
