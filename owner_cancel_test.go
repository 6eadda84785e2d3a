package idem_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemgo/idem"
)

// TestOwnerSettlesAfterCallerCancels: Owner.Run given a ctx that can be
// cancelled (not detached as advised) still settles the key when ctx is
// cancelled while work runs: a result work returns is recorded, and a key
// work gives up is released, instead of the key staying in flight with
// nobody working on it until its lease lapses.
func TestOwnerSettlesAfterCallerCancels(t *testing.T) {
	for _, record := range []bool{true, false} {
		t.Run(map[bool]string{true: "record", false: "release"}[record], func(t *testing.T) {
			s := newMem(t, nil)
			k := testKey(t, "owner-cancel")
			o := owned(t, s, k)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			o.Run(ctx, func(runCtx context.Context) ([]byte, bool) {
				cancel() // the client went away; the work finished anyway
				<-runCtx.Done()
				return []byte(`5`), record
			})
			if o.Err != nil || o.Recorded != record {
				t.Fatalf("Recorded %v, Err %v; want %v, nil", o.Recorded, o.Err, record)
			}
			b, err := s.Begin(context.Background(), k, mustRequest(t, `"req"`), nil)
			want := map[bool]idem.Kind{true: idem.PriorResult, false: idem.Fresh}[record]
			if err != nil || b.Kind != want {
				t.Fatalf("Begin after Run = %v, %v; want %v", b.Kind, err, want)
			}
		})
	}
}

// TestOwnerKeepsLeaseAfterCallerCancels: work may go on after Run's ctx is
// cancelled, and until it returns the key stays its own: the heartbeats go
// on, or the lease would lapse under the running work and a retry would
// take the key over and run it a second time.
func TestOwnerKeepsLeaseAfterCallerCancels(t *testing.T) {
	s := beatSignal{Store: newMem(t, nil), beats: make(chan struct{}, 1)}
	k := testKey(t, "owner-cancel-keeps-lease")
	b, err := s.Begin(context.Background(), k, mustRequest(t, `"req"`), &idem.BeginOpts{Lease: 15 * time.Millisecond})
	if err != nil || b.Kind != idem.Fresh {
		t.Fatalf("Begin = %+v, %v", b, err)
	}
	o := idem.Owner{Store: s, Key: k, Lease: b.Lease}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o.Run(ctx, func(runCtx context.Context) ([]byte, bool) {
		cancel()
		<-runCtx.Done()
		select { // a beat sent before the cancellation
		case <-s.beats:
		default:
		}
		for i := range 2 {
			select {
			case <-s.beats:
			case <-time.After(10 * time.Second):
				t.Errorf("heartbeat %d after the caller cancelled never came: the lease would lapse under the work", i+1)
				return nil, false
			}
		}
		return []byte(`7`), true
	})
	if o.Err != nil || !o.Recorded {
		t.Fatalf("Recorded %v, Err %v; want true, nil", o.Recorded, o.Err)
	}
	if rec, err := s.Get(context.Background(), k); err != nil || rec.Status != idem.StatusCommitted {
		t.Errorf("record = %+v, %v; want committed", rec, err)
	}
}

// TestOwnerRunOnCancelledContextDoesNotStart: Run given a ctx that is done
// already does not start work, as Do and the consumer do not: it releases
// the key, so that a retry runs the work, and sets Err to ctx's error.
func TestOwnerRunOnCancelledContextDoesNotStart(t *testing.T) {
	s := newMem(t, nil)
	k := testKey(t, "owner-cancelled-before")
	o := owned(t, s, k)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ran := false
	o.Run(ctx, func(context.Context) ([]byte, bool) { ran = true; return []byte(`1`), true })
	if ran {
		t.Error("work ran on a context already cancelled")
	}
	if !errors.Is(o.Err, context.Canceled) || o.Recorded {
		t.Errorf("Recorded %v, Err %v; want false, context.Canceled", o.Recorded, o.Err)
	}
	if _, err := s.Get(context.Background(), k); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("Get after Run = %v, want ErrNotFound (the key released)", err)
	}
}
