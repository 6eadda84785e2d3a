package idemtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idemgo/idem"
)

// rounds is how many times the race cases repeat their race, each on a
// key of its own, so that more than one interleaving is tried.
const rounds = 8

// racers is how many Begins the election cases start at once.
const racers = 16

// all runs fn(i) for i in [0, n) in n goroutines released at once, and
// waits for them.
func all(n int, fn func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			fn(i)
		}()
	}
	close(start)
	wg.Wait()
}

// elect runs racers concurrent Begins of k with r and returns the Fresh
// outcomes, failing the test on an error or on an answer other than Fresh
// and InFlight.
func elect(t *testing.T, s idem.Store, k idem.Key, r idem.Request) []idem.Outcome {
	t.Helper()
	outs := make([]idem.Outcome, racers)
	errs := make([]error, racers)
	all(racers, func(i int) { outs[i], errs[i] = s.Begin(context.Background(), k, r, nil) })
	var won []idem.Outcome
	for i, o := range outs {
		switch {
		case errs[i] != nil:
			t.Fatalf("Begin %d: %v", i, errs[i])
		case o.Kind == idem.Fresh:
			won = append(won, o)
		case o.Kind != idem.InFlight:
			t.Fatalf("Begin %d = %s, want fresh or in_flight", i, o.Kind)
		}
	}
	return won
}

// testConcurrentTakeovers: when a lease has lapsed, of many Begins racing
// to take the record over exactly one gets it (Fresh, TakenOver, a higher
// fence); the others are InFlight, and the old owner is fenced out. Two
// winners would be two owners of one key at once.
func testConcurrentTakeovers(t *testing.T, b *bundle) {
	ctx := context.Background()
	r := request(t, `{"a":1}`)
	for i := range rounds {
		k := b.key(t, fmt.Sprintf("takeover-race-%d", i))
		old := fresh(t, b.store, k, r)
		b.clock.Advance(Lease)
		won := elect(t, b.store, k, r)
		if len(won) != 1 {
			t.Fatalf("round %d: %d Begins took the lapsed lease over, want exactly 1: %+v", i, len(won), won)
		}
		if !won[0].TakenOver || won[0].Lease.Fence <= old.Fence {
			t.Errorf("round %d: takeover = %+v, want TakenOver and a fence above %d", i, won[0], old.Fence)
		}
		if err := b.store.Commit(ctx, k, old, []byte(`"old"`)); !errors.Is(err, idem.ErrStaleToken) {
			t.Errorf("round %d: old owner's Commit after the takeover: %v, want ErrStaleToken", i, err)
		}
		ok(t, b.store.Commit(ctx, k, won[0].Lease, []byte(`"new"`)), "winner's Commit")
	}
}

// testConcurrentBeginsOfExpired: a record past its expires_at counts as
// absent, and of many Begins racing to replace it exactly one gets Fresh;
// the others are InFlight.
func testConcurrentBeginsOfExpired(t *testing.T, b *bundle) {
	ctx := context.Background()
	r := request(t, `{"a":1}`)
	short := &idem.BeginOpts{Retention: time.Minute}
	for i := range rounds {
		k := b.key(t, fmt.Sprintf("expired-race-%d", i))
		o := begin(t, b.store, k, r, short)
		wantKind(t, o, idem.Fresh)
		ok(t, b.store.Commit(ctx, k, o.Lease, []byte(`"v1"`)), "Commit")
		b.clock.Advance(time.Minute)
		won := elect(t, b.store, k, r)
		if len(won) != 1 {
			t.Fatalf("round %d: %d Begins got the expired record, want exactly 1", i, len(won))
		}
		if won[0].TakenOver {
			t.Errorf("round %d: replacing an expired record reported TakenOver", i)
		}
		ok(t, b.store.Commit(ctx, k, won[0].Lease, []byte(`"v2"`)), "winner's Commit")
		if p := begin(t, b.store, k, r, nil); string(p.Result) != `"v2"` {
			t.Errorf("round %d: replay %s %s, want the new owner's result", i, p.Kind, p.Result)
		}
	}
}

// testStaleSettleRacesTakeover: an owner whose lease lapsed settles at
// the very moment another caller takes the record over. Whichever comes
// first wins, and only one can: the late settle is ErrStaleToken and
// changes nothing, or it lands and the Begin answers from it. Never do both
// succeed, which would let the old owner's outcome overwrite (or delete)
// the new owner's reservation.
func testStaleSettleRacesTakeover(t *testing.T, b *bundle) {
	ctx := context.Background()
	r := request(t, `{"a":1}`)
	settles := []struct {
		name   string
		settle func(k idem.Key, l idem.Lease) error
		// after is what a Begin answers once the settle landed.
		after idem.Kind
	}{
		{"Commit", func(k idem.Key, l idem.Lease) error { return b.store.Commit(ctx, k, l, []byte(`"old"`)) }, idem.PriorResult},
		{"FailPermanent", func(k idem.Key, l idem.Lease) error {
			return b.store.FailPermanent(ctx, k, l, idem.StoredError{Class: "old"})
		}, idem.PriorError},
		{"FailTransient", func(k idem.Key, l idem.Lease) error { return b.store.FailTransient(ctx, k, l) }, idem.Fresh},
		{"Heartbeat", func(k idem.Key, l idem.Lease) error { _, err := b.store.Heartbeat(ctx, k, l, 0); return err }, idem.InFlight},
	}
	for _, c := range settles {
		for i := range rounds {
			k := b.key(t, fmt.Sprintf("settle-race-%s-%d", c.name, i))
			old := fresh(t, b.store, k, r)
			b.clock.Advance(Lease)
			var (
				settleErr, beginErr error
				o                   idem.Outcome
			)
			all(2, func(j int) {
				if j == 0 {
					settleErr = c.settle(k, old)
				} else {
					o, beginErr = b.store.Begin(ctx, k, r, nil)
				}
			})
			ok(t, beginErr, "Begin")
			switch {
			case settleErr == nil && o.Kind == idem.Fresh && o.TakenOver:
				t.Fatalf("%s round %d: the old owner's %s succeeded and the Begin took the record over too", c.name, i, c.name)
			case settleErr == nil:
				if o.Kind != c.after {
					t.Fatalf("%s round %d: %s succeeded, then Begin = %s, want %s", c.name, i, c.name, o.Kind, c.after)
				}
			case errors.Is(settleErr, idem.ErrStaleToken):
				if o.Kind != idem.Fresh || !o.TakenOver {
					t.Fatalf("%s round %d: %s was stale but Begin = %s (taken over %v), want a takeover", c.name, i, c.name, o.Kind, o.TakenOver)
				}
				// The new owner is undisturbed.
				rec := get(t, b.store, k)
				if rec.Status != idem.StatusInProgress || rec.Fence != o.Lease.Fence || !sameTime(rec.LeaseExpiresAt, o.Lease.ExpiresAt) {
					t.Fatalf("%s round %d: record after the stale %s = %s fence %d lease %v, want the new owner's (fence %d, lease %v)",
						c.name, i, c.name, rec.Status, rec.Fence, rec.LeaseExpiresAt, o.Lease.Fence, o.Lease.ExpiresAt)
				}
				ok(t, b.store.Commit(ctx, k, o.Lease, []byte(`"new"`)), "new owner's Commit")
			default:
				t.Fatalf("%s round %d: %s: %v, want nil or ErrStaleToken", c.name, i, c.name, settleErr)
			}
		}
	}
}
