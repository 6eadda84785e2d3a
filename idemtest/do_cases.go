package idemtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemgo/idem"
)

// gatedHeartbeats is a store whose Heartbeat waits until open is closed
// (or its context ends) before it is sent: a heartbeat held up on the way
// to the store.
type gatedHeartbeats struct {
	idem.Store
	open chan struct{}
}

func (s gatedHeartbeats) Heartbeat(ctx context.Context, key idem.Key, lease idem.Lease, extend time.Duration) (idem.Lease, error) {
	select {
	case <-s.open:
	case <-ctx.Done():
		return idem.Lease{}, idem.Unavailable(ctx.Err())
	}
	return s.Store.Heartbeat(ctx, key, lease, extend)
}

// testDoTakenOver: a Do whose lease lapses while fn runs and is taken
// over by another caller is told (fn's context is cancelled with cause
// ErrLeaseLost at its next heartbeat), and what fn returns then is not
// recorded: Do returns it with an error satisfying ErrStaleToken, the new
// owner's record is left as it is, and the new owner's result is what
// every later call replays.
func testDoTakenOver(t *testing.T, b *bundle) {
	ctx := context.Background()
	k := b.key(t, "do-taken-over")
	req := chargeReq{Amount: 7, Currency: "EUR"}
	gated := gatedHeartbeats{Store: b.store, open: make(chan struct{})}
	started := make(chan struct{})
	cause := make(chan error, 1)
	type answer struct {
		res chargeRes
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := idem.Do(ctx, gated, k, req, func(ctx context.Context) (chargeRes, error) {
			close(started)
			select {
			case <-ctx.Done():
				cause <- context.Cause(ctx)
			case <-time.After(time.Minute):
				cause <- errors.New("fn's context was not cancelled within a minute")
			}
			// fn finishes all the same, with a result to commit.
			return chargeRes{ID: "first"}, nil
		}, &idem.DoOpts{HeartbeatEvery: 5 * time.Millisecond})
		done <- answer{res, err}
	}()
	<-started

	// The lease lapses, with the first run's heartbeats held up on their
	// way, and another caller takes the key over.
	b.clock.Advance(Lease)
	o := begin(t, b.store, k, mustTypedRequest(t, req), nil)
	wantKind(t, o, idem.Fresh)
	if !o.TakenOver {
		t.Fatal("the Begin after the lease lapsed did not take the key over")
	}
	close(gated.open)

	if err := <-cause; !errors.Is(err, idem.ErrLeaseLost) {
		t.Errorf("fn's context ended with cause %v, want ErrLeaseLost", err)
	}
	a := <-done
	if !errors.Is(a.err, idem.ErrStaleToken) || a.res.ID != "first" {
		t.Errorf("the taken-over Do = %+v, %v; want fn's result and an ErrStaleToken error", a.res, a.err)
	}
	rec := get(t, b.store, k)
	if rec.Status != idem.StatusInProgress || rec.Fence != o.Lease.Fence {
		t.Fatalf("record after the taken-over run = %s fence %d, want in_progress under the new owner's fence %d", rec.Status, rec.Fence, o.Lease.Fence)
	}
	ok(t, b.store.Commit(ctx, k, o.Lease, []byte(`{"id":"second","amount":0,"tags":null}`)), "the new owner's Commit")
	res, err := idem.Do(ctx, b.store, k, req, func(context.Context) (chargeRes, error) {
		t.Error("fn ran again after the new owner committed")
		return chargeRes{}, nil
	}, nil)
	if err != nil || res.ID != "second" {
		t.Errorf("Do after the new owner committed = %+v, %v; want the new owner's result replayed", res, err)
	}
}

// mustTypedRequest is the Request Do makes of req.
func mustTypedRequest(t *testing.T, req chargeReq) idem.Request {
	t.Helper()
	r, err := idem.NewTyped[chargeReq, chargeRes](nil, nil).Request(req)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
