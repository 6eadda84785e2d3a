package idemgrpc_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/contrib/idemgrpc"
	"github.com/idemgo/idem/idemtest"
	"github.com/idemgo/idem/store/memstore"
)

// flakyStore is a memstore whose next Begin, Commit or FailTransient calls
// fail, as many as their counters say, as a store whose backend went down.
type flakyStore struct {
	idem.Store
	begin, commit, release atomic.Int32
}

var errDown = idem.Unavailable(errors.New("connection reset"))

func (s *flakyStore) Begin(ctx context.Context, k idem.Key, r idem.Request, o *idem.BeginOpts) (idem.Outcome, error) {
	if s.begin.Add(-1) >= 0 {
		return idem.Outcome{}, errDown
	}
	return s.Store.Begin(ctx, k, r, o)
}

func (s *flakyStore) Commit(ctx context.Context, k idem.Key, l idem.Lease, result []byte) error {
	if s.commit.Add(-1) >= 0 {
		return errDown
	}
	return s.Store.Commit(ctx, k, l, result)
}

func (s *flakyStore) FailTransient(ctx context.Context, k idem.Key, l idem.Lease) error {
	if s.release.Add(-1) >= 0 {
		return errDown
	}
	return s.Store.FailTransient(ctx, k, l)
}

// A store call that fails at any step leaves the key free for the retry,
// or, when the release fails too, reserved only until the lease ends:
// a failed Begin reserves nothing and the call does not run; a Commit
// that fails once (a connection dropped) is made again and records the
// response, which the retry gets replayed; a Commit that keeps failing
// for the whole StoreTimeout delivers the response, unrecorded, and
// releases the key, so that the retry runs again; a failed Commit whose
// release fails too leaves the key in progress (Aborted) until its lease
// lapses, and then the retry runs.
func TestStoreFailuresAtEachStep(t *testing.T) {
	const lease = 10 * time.Second
	const down = 1 << 20 // failing for the whole StoreTimeout
	for _, tc := range []struct {
		name                   string
		begin, commit, release int32
		firstCode              codes.Code
		recorded               bool // the first call's response
		runsAfterFirst         int
		heldUntilLease         bool
	}{
		{name: "Begin", begin: 1, firstCode: codes.Unavailable, runsAfterFirst: 0},
		{name: "Commit once", commit: 1, firstCode: codes.OK, recorded: true, runsAfterFirst: 1},
		{name: "Commit", commit: down, firstCode: codes.OK, runsAfterFirst: 1},
		{name: "Commit and release", commit: down, release: 1, firstCode: codes.OK, runsAfterFirst: 1, heldUntilLease: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := idemtest.NewClock()
			ms, err := memstore.New(memstore.Config{Now: clock.Now, Lease: lease})
			if err != nil {
				t.Fatal(err)
			}
			fs := &flakyStore{Store: ms}
			fs.begin.Store(tc.begin)
			fs.commit.Store(tc.commit)
			fs.release.Store(tc.release)
			b := setup(t, idemgrpc.Config{Store: fs, StoreTimeout: 100 * time.Millisecond})
			first := b.call(chargeMethod, amount(1), key("flaky")...)
			if first.code() != tc.firstCode || first.replayed() {
				t.Fatalf("first call: %v replayed %v, want %v", first.err, first.replayed(), tc.firstCode)
			}
			if e := <-b.events; errors.Is(e.Err, idem.ErrUnavailable) == tc.recorded {
				t.Errorf("first call's event %+v, want the store's error unless the response was recorded", e)
			}
			fs.commit.Store(0) // the store is back
			wantRuns(t, b, tc.runsAfterFirst)
			if tc.recorded {
				if r := b.call(chargeMethod, amount(1), key("flaky")...); !r.replayed() {
					t.Errorf("retry: %v, not replayed; want the recorded response", r.err)
				}
				wantRuns(t, b, tc.runsAfterFirst)
				return
			}
			if tc.heldUntilLease {
				wantError(t, b.call(chargeMethod, amount(1), key("flaky")...), codes.Aborted, idemgrpc.ReasonInProgress)
				clock.Advance(lease)
			}
			r := b.call(chargeMethod, amount(1), key("flaky")...)
			if r.err != nil || r.replayed() {
				t.Fatalf("retry: %v replayed %v, want it run", r.err, r.replayed())
			}
			wantRuns(t, b, tc.runsAfterFirst+1)
			if r := b.call(chargeMethod, amount(1), key("flaky")...); !r.replayed() {
				t.Errorf("the retry's outcome was not recorded: %v", r.err)
			}
		})
	}
}
