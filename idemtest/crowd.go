package idemtest

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
)

// CrowdOpts configures Crowd.
type CrowdOpts struct {
	// Refuse, when set, gives every 50th caller (i%50 == 7) a request the
	// store refuses, such as a payload over its limit; Refused checks the
	// error of that caller's Begin, which fails alone.
	Refuse  func(i int) idem.Request
	Refused func(err error) bool
	// Leave gives every 10th caller (i%10 == 3) a context that ends
	// within 5 ms, while its calls may wait in a batch or run. A caller
	// that left before its answer leaves its key free: Fresh again within
	// 10 s (a store may release what it reserved for nobody once the
	// answer comes).
	Leave bool
}

// crowdCallers is how many callers Crowd runs at once.
const crowdCallers = 1000

// Crowd has a thousand callers call s at once, on keys of their own with
// payloads and results of their own, as a store that sends concurrent
// calls together (a batch, a pipeline) must answer each of them apart:
// each Begin is Fresh with a lease that commits the caller's key, and the
// caller's replay is its own result. Among them, pairs of callers on one
// key with one request (i%50 == 8 and 9) elect exactly one Fresh; and, as
// opts says, callers whose request is refused fail alone, and callers
// whose context ended first leave their keys free.
func Crowd(t *testing.T, s idem.Store, opts CrowdOpts) {
	t.Helper()
	ns := RandomNamespace(t)
	request := func(owner int) idem.Request {
		r, err := idem.NewRequest(fmt.Appendf(nil, `{"i":%d,"pad":%q}`, owner, strings.Repeat("x", owner%97)))
		if err != nil {
			t.Error(err)
		}
		return r
	}
	type answer struct {
		key           idem.Key
		req           idem.Request
		begin, replay idem.Outcome
		err           error
	}
	answers := make([]answer, crowdCallers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range crowdCallers {
		wg.Go(func() {
			<-start
			a := &answers[i]
			owner := i
			if i%50 == 9 { // the key and request of the caller before it
				owner = i - 1
			}
			var err error
			if a.key, err = idem.NewKey(ns, fmt.Sprintf("k%d", owner)); err != nil {
				t.Error(err)
				return
			}
			a.req = request(owner)
			if i%50 == 7 && opts.Refuse != nil {
				a.req = opts.Refuse(i)
			}
			ctx := context.Background()
			if i%10 == 3 && opts.Leave {
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
	var left []answer
	for i, a := range answers {
		switch {
		case i%50 == 7 && opts.Refuse != nil:
			if a.err == nil || !opts.Refused(a.err) {
				t.Errorf("caller %d (a request the store refuses): %v, %v; want the refusal", i, a.begin.Kind, a.err)
			}
		case a.err != nil && i%10 == 3 && opts.Leave && errors.Is(a.err, context.DeadlineExceeded):
			left = append(left, a)
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
	for i := 8; i < crowdCallers; i += 50 {
		x, y := answers[i], answers[i+1]
		if (x.begin.Kind == idem.Fresh) == (y.begin.Kind == idem.Fresh) && x.err == nil && y.err == nil {
			t.Errorf("callers %d and %d of one key: %v and %v, want exactly one Fresh", i, i+1, x.begin.Kind, y.begin.Kind)
		}
	}
	for _, a := range left {
		waitFree(t, s, a.key, a.req)
	}
}

// waitFree waits up to 10 s for a Begin of k to be Fresh, and fails t if
// none is.
func waitFree(t *testing.T, s idem.Store, k idem.Key, r idem.Request) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		o, err := s.Begin(context.Background(), k, r, nil)
		if err == nil && o.Kind == idem.Fresh {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("key %v, whose caller left before its answer: Begin = %v, %v 10 s later; want Fresh", k, o.Kind, err)
			return
		}
	}
}
