package sqlitestore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
)

// TestBatchAnswersEachCallerItsOwn: a thousand callers at once, on keys
// of their own with payloads and results of their own, through a store
// with Config.Batch, each get their own answers: a Begin that answered
// Fresh has a lease that commits its key, and the replay is the caller's
// own result. A pair of callers on one key elect one owner; and a caller
// whose deadline ended first left nothing behind: its key is Fresh again.
func TestBatchAnswersEachCallerItsOwn(t *testing.T) {
	db, _ := newDB(t, 4)
	s := newStoreBatch(t, db, nil, true)
	ns := idemtest.RandomNamespace(t)
	const callers = 1000
	type answer struct {
		key           idem.Key
		req           idem.Request
		begin, replay idem.Outcome
		err           error
	}
	answers := make([]answer, callers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			<-start
			a := &answers[i]
			owner := i
			if i%50 == 9 { // the same key and request as the caller before it
				owner = i - 1
			}
			a.key = mustKey(t, ns, fmt.Sprintf("k%d", owner))
			a.req = mustRequest(t, fmt.Sprintf(`{"i":%d,"pad":%q}`, owner, strings.Repeat("x", owner%97)))
			ctx := context.Background()
			if i%10 == 3 { // may end while the call waits or runs
				c, cancel := context.WithTimeout(ctx, time.Duration(rand.IntN(5000))*time.Microsecond)
				defer cancel()
				ctx = c
			}
			if a.begin, a.err = s.Begin(ctx, a.key, a.req, nil); a.err != nil || a.begin.Kind != idem.Fresh {
				return
			}
			result := fmt.Appendf(nil, `{"result":%d}`, i)
			if a.err = s.Commit(context.Background(), a.key, a.begin.Lease, result); a.err != nil {
				return
			}
			a.replay, a.err = s.Begin(context.Background(), a.key, a.req, nil)
		})
	}
	close(start)
	wg.Wait()
	for i, a := range answers {
		switch {
		case a.err != nil && i%10 == 3 && errors.Is(a.err, context.DeadlineExceeded):
			mustBegin(t, s, a.key, a.req, idem.Fresh) // nothing was left behind
		case a.err != nil:
			t.Errorf("caller %d: %v", i, a.err)
		case a.begin.Kind == idem.Fresh:
			if want := fmt.Sprintf(`{"result":%d}`, i); a.replay.Kind != idem.PriorResult || string(a.replay.Result) != want {
				t.Errorf("caller %d: replay = %v %s, want its own result %s", i, a.replay.Kind, a.replay.Result, want)
			}
		case i%50 != 8 && i%50 != 9:
			t.Errorf("caller %d: Begin of its own key = %v, want Fresh", i, a.begin.Kind)
		}
	}
	for i := 8; i < callers; i += 50 {
		x, y := answers[i], answers[i+1]
		if (x.begin.Kind == idem.Fresh) == (y.begin.Kind == idem.Fresh) && x.err == nil && y.err == nil {
			t.Errorf("callers %d and %d of one key: %v and %v, want exactly one Fresh", i, i+1, x.begin.Kind, y.begin.Kind)
		}
	}
}
