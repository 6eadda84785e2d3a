package durable_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/idemgo/idem/durable"
)

// InsertOrSignal, Insert, Signal and Cancel racing on one correlation key
// answer only with their documented errors (a duplicate, no target, a key
// that changed hands too often), never a database error such as a unique
// violation, and the key never has two live instances.
func TestKeyOperationsUnderContentionAnswerTypedErrors(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	b := setup(t, nil)
	const key = "storm"
	var wg sync.WaitGroup
	errs := make(chan error, 1000)
	typed := func(op string, err error) {
		if err == nil || errors.Is(err, durable.ErrDuplicate) || errors.Is(err, durable.ErrNoTarget) ||
			errors.Is(err, durable.ErrTerminal) || strings.Contains(err.Error(), "changed hands") {
			return
		}
		errs <- fmt.Errorf("%s: %v", op, err)
	}
	for w := range 4 {
		wg.Go(func() {
			for i := range 100 {
				_, _, err := b.client.InsertOrSignal(ctxT(t), ctl.With(ctlState{}), &durable.InsertOpts{CorrelationKey: key}, "go", i, fmt.Sprintf("d%d-%d", w, i%7))
				typed("InsertOrSignal", err)
			}
		})
	}
	wg.Go(func() {
		for range 200 {
			typed("Cancel", b.client.Cancel(ctxT(t), durable.ByKey(key), "x"))
		}
	})
	wg.Go(func() {
		for range 200 {
			_, err := b.client.Insert(ctxT(t), ctl.With(ctlState{}), &durable.InsertOpts{CorrelationKey: key})
			typed("Insert", err)
		}
	})
	wg.Go(func() {
		for range 200 {
			typed("Signal", b.client.Signal(ctxT(t), durable.ByKey(key), "go", 1, ""))
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := b.count(t, `SELECT count(*) FROM durable_instance WHERE correlation_key = $1 AND status NOT IN ('done','failed','cancelled')`, key); n > 1 {
		t.Fatalf("%d live instances carry the key, want at most 1", n)
	}
}
