package pgstore_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
	"github.com/idemgo/idem/store/pgstore"
)

// TestPipelineAnswersEachCallerItsOwn: a thousand callers at once, on
// keys of their own with payloads and results of their own, through a
// pipelined store whose batches are deep and few, every caller gets its
// own answers: its Begin is Fresh with a lease that commits its key, and
// its replay is its own result. Among them, a pair of callers on one key
// elect one owner, and a caller whose payload the server refuses (a number
// beyond jsonb's range) fails alone, with ErrInvalidPayload.
func TestPipelineAnswersEachCallerItsOwn(t *testing.T) {
	tb := setup(t, pgstore.Config{Pipeline: true, PipelineLanes: 2, PipelineDepth: 64, Lease: time.Minute})
	ns := idemtest.RandomNamespace(t)
	const callers = 1000
	type answer struct {
		begin, replay idem.Outcome
		err           error
	}
	answers := make([]answer, callers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			<-start
			ctx := ctxT(t)
			a := &answers[i]
			k := mustKey(t, ns, fmt.Sprintf("k%d", i))
			payload := fmt.Sprintf(`{"i":%d,"pad":%q}`, i, strings.Repeat("x", i%97))
			switch {
			case i%50 == 7: // refused by the server
				payload = fmt.Sprintf(`{"i":%d,"n":1e200000}`, i)
			case i%50 == 9: // the same key as the caller before it
				k = mustKey(t, ns, fmt.Sprintf("k%d", i-1))
				payload = fmt.Sprintf(`{"i":%d,"pad":%q}`, i-1, strings.Repeat("x", (i-1)%97))
			}
			r := idem.Request{Fingerprint: mustRequest(t, fmt.Sprintf(`{"fp":%d}`, i)).Fingerprint, Payload: []byte(payload)}
			if i%50 == 9 {
				r.Fingerprint = mustRequest(t, fmt.Sprintf(`{"fp":%d}`, i-1)).Fingerprint
			}
			if a.begin, a.err = tb.store.Begin(ctx, k, r, nil); a.err != nil || a.begin.Kind != idem.Fresh {
				return
			}
			result := fmt.Appendf(nil, `{"result":%d}`, i)
			if a.err = tb.store.Commit(ctx, k, a.begin.Lease, result); a.err != nil {
				return
			}
			a.replay, a.err = tb.store.Begin(ctx, k, r, nil)
		})
	}
	close(start)
	wg.Wait()
	for i := range callers {
		a := answers[i]
		switch {
		case i%50 == 7:
			if !errors.Is(a.err, idem.ErrInvalidPayload) {
				t.Errorf("caller %d (a number beyond jsonb): %v %v, want ErrInvalidPayload", i, a.begin.Kind, a.err)
			}
		case i%50 == 8 || i%50 == 9:
			if a.err != nil {
				t.Errorf("caller %d: %v", i, a.err)
			}
		default:
			if a.err != nil || a.begin.Kind != idem.Fresh {
				t.Errorf("caller %d: Begin = %v, %v; want Fresh", i, a.begin.Kind, a.err)
				continue
			}
			if want := fmt.Sprintf(`{"result":%d}`, i); a.replay.Kind != idem.PriorResult || string(a.replay.Result) != want {
				t.Errorf("caller %d: replay = %v %s, want its own result %s", i, a.replay.Kind, a.replay.Result, want)
			}
		}
	}
	for i := 8; i < callers; i += 50 {
		x, y := answers[i], answers[i+1]
		fresh := 0
		for _, a := range []answer{x, y} {
			if a.begin.Kind == idem.Fresh {
				fresh++
			}
		}
		if fresh != 1 {
			t.Errorf("callers %d and %d of one key: %v and %v, want exactly one Fresh", i, i+1, x.begin.Kind, y.begin.Kind)
			continue
		}
		if got := x.replay; x.begin.Kind == idem.Fresh && string(got.Result) != fmt.Sprintf(`{"result":%d}`, i) {
			t.Errorf("caller %d: replay %s", i, got.Result)
		}
		if got := y.replay; y.begin.Kind == idem.Fresh && string(got.Result) != fmt.Sprintf(`{"result":%d}`, i+1) {
			t.Errorf("caller %d: replay %s", i+1, got.Result)
		}
	}
}
