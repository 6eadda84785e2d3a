package idemtest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/idemgo/idem"
)

type chargeReq struct {
	Amount   int    `json:"amount"`
	Currency string `json:"currency"`
}

type chargeRes struct {
	ID     string   `json:"id"`
	Amount int      `json:"amount"`
	Tags   []string `json:"tags"`
}

// chargeResV2 is chargeRes after an incompatible schema change.
type chargeResV2 struct {
	ID     int `json:"id"`
	Amount int `json:"amount"`
}

// chargeReqV2 is chargeReq after an incompatible schema change.
type chargeReqV2 struct {
	Amount   string `json:"amount"`
	Currency string `json:"currency"`
}

func testTyped(t *testing.T, b *bundle) {
	ctx := context.Background()
	typed := idem.NewTyped[chargeReq, chargeRes](b.store, nil)
	k := b.key(t, "typed-1")
	req := chargeReq{Amount: 100, Currency: "EUR"}
	o, err := typed.Begin(ctx, k, req, nil)
	ok(t, err, "typed Begin")
	wantKind(t, idem.Outcome{Kind: o.Kind}, idem.Fresh)
	res := chargeRes{ID: "ch_1", Amount: 100, Tags: []string{"b", "a"}}
	ok(t, typed.Commit(ctx, k, o.Lease, res), "typed Commit")
	p, err := typed.Begin(ctx, k, req, nil)
	ok(t, err, "typed Begin replay")
	if p.Kind != idem.PriorResult {
		t.Fatalf("replay kind = %s", p.Kind)
	}
	if diff := cmp.Diff(res, p.Result); diff != "" {
		t.Errorf("typed replay (-want +got):\n%s", diff)
	}

	// A result that no longer decodes is ErrIncompatibleState.
	v2 := idem.NewTyped[chargeReq, chargeResV2](b.store, nil)
	_, err = v2.Begin(ctx, k, req, nil)
	var de *idem.DecodeError
	if !errors.Is(err, idem.ErrIncompatibleState) || !errors.As(err, &de) || de.What != "result" {
		t.Errorf("replay into an incompatible Res: %v, want a result *DecodeError (ErrIncompatibleState)", err)
	}

	// A recorded request that no longer decodes still reports the mismatch.
	r2 := idem.NewTyped[chargeReqV2, chargeRes](b.store, nil)
	m, err := r2.Begin(ctx, k, chargeReqV2{Amount: "100", Currency: "EUR"}, nil)
	ok(t, err, "Begin with an incompatible Req")
	if m.Kind != idem.Mismatch || !errors.Is(m.RecordedRequestErr, idem.ErrIncompatibleState) {
		t.Errorf("outcome = %s, recorded request error %v; want mismatch with a *DecodeError", m.Kind, m.RecordedRequestErr)
	}
	if m.RecordedHash.IsZero() || m.RecordedHash == m.SubmittedHash {
		t.Errorf("mismatch hashes %s / %s", m.RecordedHash, m.SubmittedHash)
	}
	// With a compatible Req the recorded request decodes.
	m2, err := typed.Begin(ctx, k, chargeReq{Amount: 5, Currency: "EUR"}, nil)
	ok(t, err, "typed Begin mismatch")
	if m2.Kind != idem.Mismatch || m2.RecordedRequestErr != nil || m2.RecordedRequest != req {
		t.Errorf("mismatch = %s %+v %v, want the recorded %+v", m2.Kind, m2.RecordedRequest, m2.RecordedRequestErr, req)
	}
}

func testDo(t *testing.T, b *bundle) {
	ctx := context.Background()
	k := b.key(t, "do-1")
	var runs atomic.Int32
	charge := func(context.Context) (chargeRes, error) {
		runs.Add(1)
		return chargeRes{ID: "ch_9", Amount: 9}, nil
	}
	req := chargeReq{Amount: 9, Currency: "EUR"}
	for i := 0; i < 5; i++ {
		res, err := idem.Do(ctx, b.store, k, req, charge, nil)
		ok(t, err, "Do")
		if res.ID != "ch_9" {
			t.Fatalf("Do returned %+v", res)
		}
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("fn ran %d times, want 1", n)
	}

	// A transient failure releases the key: the retry runs again.
	k2 := b.key(t, "do-2")
	boom := errors.New("boom")
	_, err := idem.Do(ctx, b.store, k2, req, func(context.Context) (chargeRes, error) { return chargeRes{}, boom }, nil)
	if !errors.Is(err, boom) {
		t.Fatalf("Do = %v, want boom", err)
	}
	if _, err := b.store.Get(ctx, k2); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("transient failure left a record: %v", err)
	}
	// A permanent failure is recorded and replayed without running.
	declined := idem.Permanent("card.declined", errors.New("declined"))
	_, err = idem.Do(ctx, b.store, k2, req, func(context.Context) (chargeRes, error) { return chargeRes{}, declined }, nil)
	if !errors.Is(err, declined) {
		t.Fatalf("Do = %v, want the permanent error", err)
	}
	_, err = idem.Do(ctx, b.store, k2, req, func(context.Context) (chargeRes, error) {
		t.Error("fn ran after a permanent failure")
		return chargeRes{}, nil
	}, nil)
	var se *idem.StoredError
	if !errors.As(err, &se) || se.Class != "card.declined" || se.Message != "declined" {
		t.Errorf("replayed failure = %v, want *StoredError card.declined", err)
	}

	// Concurrent callers: one runs, the others see ErrInFlight or the result.
	k3 := b.key(t, "do-3")
	var wg sync.WaitGroup
	release := make(chan struct{})
	var runs3 atomic.Int32
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := idem.Do(ctx, b.store, k3, req, func(context.Context) (chargeRes, error) {
				runs3.Add(1)
				<-release
				return chargeRes{ID: "x"}, nil
			}, nil)
			if err != nil && !errors.Is(err, idem.ErrInFlight) {
				t.Errorf("concurrent Do: %v", err)
			}
		}()
	}
	// Let the owner finish only after every caller has had its answer.
	waitInFlight(t, b, k3)
	close(release)
	wg.Wait()
	if n := runs3.Load(); n != 1 {
		t.Errorf("fn ran %d times under concurrency, want 1", n)
	}
}

// waitInFlight waits until key is reserved.
func waitInFlight(t *testing.T, b *bundle, k idem.Key) {
	t.Helper()
	for {
		rec, err := b.store.Get(context.Background(), k)
		if err == nil && rec.Status == idem.StatusInProgress {
			return
		}
		if err != nil && !errors.Is(err, idem.ErrNotFound) {
			t.Fatal(err)
		}
	}
}
