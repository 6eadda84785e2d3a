package pgstore_test

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
	"github.com/idemgo/idem/store/pgstore"
)

// TestGenericPlansUseThePrimaryKey: the point statements (Begin, the settle
// calls, Get) find their row through the primary key even in a generic
// plan made while the table is new and has no statistics, which is when
// a connection's prepared statements usually get theirs. An index that
// also starts with namespace made such plans walk every row of the
// namespace, so that each call grew slower with the table, until the
// table was next analyzed.
func TestGenericPlansUseThePrimaryKey(t *testing.T) {
	tb := setup(t, pgstore.Config{})
	pc, err := pgxpool.ParseConfig(tb.url)
	if err != nil {
		t.Fatal(err)
	}
	pc.MaxConns = 1 // every statement prepared on the connection examined below
	pool, err := pgxpool.NewWithConfig(ctxT(t), pc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s, err := pgstore.New(pool, pgstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	ns := idemtest.RandomNamespace(t)
	req := mustRequest(t, `{"a":1}`)
	for i, settle := range []string{"commit", "fail", "release"} {
		k := mustKey(t, ns, settle)
		o, err := s.Begin(ctx, k, req, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Heartbeat(ctx, k, o.Lease, time.Minute); err != nil {
			t.Fatal(err)
		}
		switch i {
		case 0:
			err = s.Commit(ctx, k, o.Lease, []byte(`1`))
		case 1:
			err = s.FailPermanent(ctx, k, o.Lease, idem.StoredError{Class: "c"})
		default:
			err = s.FailTransient(ctx, k, o.Lease)
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, k); err != nil && i < 2 {
			t.Fatal(err)
		}
	}

	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SET plan_cache_mode = force_generic_plan"); err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = conn.Exec(ctx, "RESET plan_cache_mode") }()
	rows, err := conn.Query(ctx, `SELECT name, statement, cardinality(parameter_types) FROM pg_prepared_statements
		WHERE statement LIKE '%idempotency_record%' AND statement NOT LIKE 'DELETE FROM%USING (%'
		  AND statement NOT LIKE '%pg_prepared_statements%'`)
	if err != nil {
		t.Fatal(err)
	}
	type stmt struct {
		name, sql string
		params    int
	}
	var stmts []stmt
	for rows.Next() {
		var st stmt
		if err := rows.Scan(&st.name, &st.sql, &st.params); err != nil {
			t.Fatal(err)
		}
		stmts = append(stmts, st)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(stmts) < 6 {
		t.Fatalf("%d prepared statements of the store, want Begin, Heartbeat, three settles and Get", len(stmts))
	}
	for _, st := range stmts {
		nulls := strings.TrimSuffix(strings.Repeat("NULL,", st.params), ",")
		var plan []string
		prows, err := conn.Query(ctx, "EXPLAIN EXECUTE "+st.name+"("+nulls+")")
		if err != nil {
			t.Fatalf("EXPLAIN EXECUTE of %s: %v", st.sql, err)
		}
		for prows.Next() {
			var line string
			if err := prows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, line)
		}
		prows.Close()
		text := strings.Join(plan, "\n")
		if !strings.Contains(text, "idempotency_record_pkey") || strings.Contains(text, "_idx") {
			t.Errorf("generic plan of\n%s\nis\n%s\nwant the primary key alone", st.sql, text)
		}
	}
}

// TestMigrateReplacesTheOldIndexes: a table made by an earlier schema
// version, with its expiry index, version 1's (namespace, expires_at) or
// version 2's (expires_at, namespace), loses that index to the purge index
// when Migrate runs again.
func TestMigrateReplacesTheOldIndexes(t *testing.T) {
	for _, old := range []string{
		"idempotency_record_expires_idx ON idempotency_record (namespace, expires_at)",
		"idempotency_record_expiry_idx ON idempotency_record (expires_at, namespace)",
	} {
		tb := setup(t, pgstore.Config{})
		ctx := ctxT(t)
		if _, err := tb.pool.Exec(ctx, `DROP INDEX idempotency_record_purge_idx; CREATE INDEX `+old); err != nil {
			t.Fatal(err)
		}
		if err := tb.store.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		var names []string
		rows, err := tb.pool.Query(ctx, `SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() ORDER BY indexname`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				t.Fatal(err)
			}
			names = append(names, n)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(names, ","); got != "idempotency_record_pkey,idempotency_record_purge_idx" {
			t.Fatalf("indexes after Migrate from %s: %s", old, got)
		}
	}
}
