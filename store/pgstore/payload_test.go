package pgstore_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
	"github.com/idemgo/idem/store/pgstore"
)

// TestJSONNull: the JSON document null, as a request (nil payload) and as
// a result, is stored as a value, not as SQL NULL, and reads back as null
// through both drivers.
func TestJSONNull(t *testing.T) {
	tb := setup(t, pgstore.Config{})
	db := stdlib.OpenDBFromPool(tb.pool)
	t.Cleanup(func() { _ = db.Close() })
	ctx := ctxT(t)
	k := mustKey(t, idemtest.RandomNamespace(t), "null")
	req := idem.Request{Fingerprint: mustRequest(t, `{}`).Fingerprint}
	o, err := tb.store.Begin(ctx, k, req, nil)
	if err != nil || o.Kind != idem.Fresh {
		t.Fatalf("Begin = %v, %v", o.Kind, err)
	}
	if err := tb.store.Commit(ctx, k, o.Lease, []byte(`null`)); err != nil {
		t.Fatal(err)
	}
	check := func(name string, s idem.Store) {
		t.Helper()
		p, err := s.Begin(ctx, k, req, nil)
		if err != nil || p.Kind != idem.PriorResult || string(p.Result) != "null" {
			t.Errorf("%s: replay = %v %q, %v; want null", name, p.Kind, p.Result, err)
		}
		rec, err := s.Get(ctx, k)
		if err != nil || string(rec.Request) != "null" || string(rec.Result) != "null" {
			t.Errorf("%s: record request %q result %q, %v; want null and null", name, rec.Request, rec.Result, err)
		}
	}
	check("pool", tb.store)
	tx, err := db.BeginTx(context.Background(), &sql.TxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	check("database/sql", tb.store.WithSQLTx(tx))
}
