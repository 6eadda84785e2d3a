package pgstore_test

import (
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
	"github.com/idemgo/idem/store/pgstore"
)

// TestTxBeginSavepointEndsWithTheCallers: the savepoint a transactional
// Begin runs under ends with a savepoint of the caller's around it: a
// reservation made after the caller's SAVEPOINT is undone by ROLLBACK TO
// it, keeps no lock (another Begin of the key is Fresh), and Begins and
// settles after it, many in one transaction, commit as usual.
func TestTxBeginSavepointEndsWithTheCallers(t *testing.T) {
	tb := setup(t, pgstore.Config{})
	ctx := ctxT(t)
	ns := idemtest.RandomNamespace(t)
	req := mustRequest(t, `{"a":1}`)
	undone := mustKey(t, ns, "undone")

	tx, err := tb.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	s := tb.store.WithTx(tx)
	if _, err := tx.Exec(ctx, "SAVEPOINT caller"); err != nil {
		t.Fatal(err)
	}
	o, err := s.Begin(ctx, undone, req, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantOutcome(t, o, idem.Fresh)
	if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT caller"); err != nil {
		t.Fatal(err)
	}
	// Undone, lock and all: a lease-mode Begin takes the key at once.
	o, err = tb.store.Begin(ctx, undone, req, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantOutcome(t, o, idem.Fresh)
	if err := tb.store.FailTransient(ctx, undone, o.Lease); err != nil {
		t.Fatal(err)
	}

	// Many reservations in the one transaction, each settled.
	var kept []idem.Key
	for i := range 100 {
		k := mustKey(t, ns, "kept-"+string(rune('a'+i%26))+string(rune('a'+i/26)))
		o, err := s.Begin(ctx, k, req, nil)
		if err != nil {
			t.Fatal(err)
		}
		wantOutcome(t, o, idem.Fresh)
		if err := s.Commit(ctx, k, o.Lease, []byte(`{"ok":true}`)); err != nil {
			t.Fatal(err)
		}
		kept = append(kept, k)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for _, k := range kept {
		o, err := tb.store.Begin(ctx, k, req, nil)
		if err != nil {
			t.Fatal(err)
		}
		wantOutcome(t, o, idem.PriorResult)
	}
}
