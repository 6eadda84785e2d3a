package idemtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemgo/idem"
)

func txCases() []testCase {
	return []testCase{
		{"S6/OtherTransactionSeesInFlightAtOnce", testTxInFlight},
		{"S6/RollbackRemovesReservation", testTxRollback},
		{"S6/CommitMakesResultVisible", testTxCommit},
	}
}

// quick bounds calls that must not block behind another transaction.
func quick(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func testTxInFlight(t *testing.T, b *bundle) {
	if b.h.SingleWriter {
		t.Skip("Harness.SingleWriter: a second write transaction waits for the first to end, so it cannot answer InFlight while the first is open")
	}
	s1, _, rollback1 := b.h.NewTx(t, b.clock.Now)
	defer func() { _ = rollback1() }()
	s2, _, rollback2 := b.h.NewTx(t, b.clock.Now)
	defer func() { _ = rollback2() }()
	k := b.key(t, "tx-1")
	r := request(t, `{"a":1}`)
	o1, err := s1.Begin(quick(t), k, r, nil)
	ok(t, err, "Begin in tx1")
	wantKind(t, o1, idem.Fresh)
	start := time.Now()
	o2, err := s2.Begin(quick(t), k, r, nil)
	ok(t, err, "Begin in tx2 (must not block behind tx1)")
	wantKind(t, o2, idem.InFlight)
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("second Begin took %v, want an immediate answer", d)
	}
}

func testTxRollback(t *testing.T, b *bundle) {
	s1, _, rollback1 := b.h.NewTx(t, b.clock.Now)
	k := b.key(t, "tx-2")
	r := request(t, `{"a":1}`)
	o1, err := s1.Begin(quick(t), k, r, nil)
	ok(t, err, "Begin in tx1")
	wantKind(t, o1, idem.Fresh)
	ok(t, rollback1(), "rollback tx1")
	s2, commit2, rollback2 := b.h.NewTx(t, b.clock.Now)
	defer func() { _ = rollback2() }()
	o2, err := s2.Begin(quick(t), k, r, nil)
	ok(t, err, "Begin in tx2")
	wantKind(t, o2, idem.Fresh)
	ok(t, s2.Commit(quick(t), k, o2.Lease, []byte(`"done"`)), "Commit in tx2")
	ok(t, commit2(), "commit tx2")
	if _, err := b.store.Get(quick(t), k); err != nil {
		t.Errorf("Get after the committed transaction: %v", err)
	}
}

func testTxCommit(t *testing.T, b *bundle) {
	s1, commit1, rollback1 := b.h.NewTx(t, b.clock.Now)
	defer func() { _ = rollback1() }()
	k := b.key(t, "tx-3")
	r := request(t, `{"a":1}`)
	o1, err := s1.Begin(quick(t), k, r, nil)
	ok(t, err, "Begin in tx1")
	wantKind(t, o1, idem.Fresh)
	ok(t, s1.Commit(quick(t), k, o1.Lease, []byte(`{"v":1}`)), "Commit in tx1")
	if _, err := b.store.Get(quick(t), k); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("uncommitted record visible outside the transaction: %v", err)
	}
	ok(t, commit1(), "commit tx1")
	o := begin(t, b.store, k, r, nil)
	wantKind(t, o, idem.PriorResult)
	if string(o.Result) != `{"v":1}` {
		t.Errorf("result %s", o.Result)
	}
}
