package durable_test

import (
	"testing"

	"github.com/idemgo/idem/durable"
)

func TestSmoke(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	b := setup(t, fast(ctl))
	b.start(t)
	id := b.insert(t, ctl.With(ctlState{}), &durable.InsertOpts{CorrelationKey: "k"})
	b.waitStatus(t, id, durable.StatusAwaitingSignal)
	b.signal(t, durable.ByKey("k"), "go", "one", "")
	b.signal(t, durable.ByID(id), "finish", map[string]int{"n": 1}, "")
	in := b.waitStatus(t, id, durable.StatusDone)
	t.Logf("%+v", in)
}
