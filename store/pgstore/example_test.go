package pgstore_test

import (
	"context"
	"fmt"
	"log"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/store/pgstore"
)

// The store in lease mode, as an HTTP service or a message consumer uses
// it: Begin reserves the key for everyone at once; the owner runs the
// effect and commits; retries replay the result. (It needs a server, so it
// is compiled but not run.)
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@localhost/app")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	store, err := pgstore.New(pool, pgstore.Config{})
	if err != nil {
		log.Fatal(err)
	}
	if err := store.Migrate(ctx); err != nil {
		log.Fatal(err)
	}

	// The client's key, scoped by who the client is: another caller's
	// "order-42" is another operation.
	key, err := idem.ParseKey(idem.MustNamespace("payments"), "order-42")
	if err == nil {
		key, err = key.WithScope("customer-7")
	}
	if err != nil {
		log.Fatal(err)
	}
	req, err := idem.NewRequest([]byte(`{"amount":100,"currency":"EUR"}`))
	if err != nil {
		log.Fatal(err)
	}
	o, err := store.Begin(ctx, key, req, nil)
	if err != nil {
		log.Fatal(err) // errors.Is(err, idem.ErrUnavailable): answer 503
	}
	switch o.Kind {
	case idem.Fresh:
		result := []byte(`{"charge":"ch_1"}`) // run the effect here
		if err := store.Commit(ctx, key, o.Lease, result); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("charged: %s\n", result)
	case idem.PriorResult:
		fmt.Printf("replayed: %s\n", o.Result)
	default:
		fmt.Println(o.Err()) // in flight, mismatch or a stored failure
	}
}

// The store in transactional mode: the reservation, the business write and
// the result commit together, or not at all. (Compiled, not run.)
func ExampleStore_WithTx() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@localhost/app")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	store, err := pgstore.New(pool, pgstore.Config{})
	if err != nil {
		log.Fatal(err)
	}
	key, _ := idem.ParseKey(idem.MustNamespace("orders"), "order-42")
	req, _ := idem.NewRequest([]byte(`{"sku":"b-1","qty":2}`))

	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		s := store.WithTx(tx)
		o, err := s.Begin(ctx, key, req, nil)
		if err != nil {
			return err
		}
		if o.Kind != idem.Fresh {
			return o.Err() // nil for a replay: nothing to do
		}
		if _, err := tx.Exec(ctx, `INSERT INTO orders (sku, qty) VALUES ('b-1', 2)`); err != nil {
			return err
		}
		return s.Commit(ctx, key, o.Lease, []byte(`{"order":"created"}`))
	})
	if err != nil {
		log.Fatal(err)
	}
}

// MigrationSQL prints the schema for another migration tool.
func ExampleMigrationSQL() {
	sql, err := pgstore.MigrationSQL("idem.records")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(sql)
	// Output:
	// DO $$
	// BEGIN
	//     IF to_regnamespace('idem') IS NULL THEN
	//         CREATE SCHEMA "idem";
	//     END IF;
	// END
	// $$;
	//
	// -- idem PostgreSQL schema, version 1. Every statement is idempotent: Migrate
	// -- runs all of them at every call, under an advisory lock, from any number of
	// -- processes.
	// --
	// -- One row per key (namespace, scope, key_value); scope is '' for keys
	// -- without one. Timestamps come from the application's clock, never from
	// -- now(). request_payload and error_payload are JSONB (validated, readable
	// -- in SQL); result_payload is JSON, which PostgreSQL validates but keeps as
	// -- text, so that a replay returns the committed bytes exactly.
	// CREATE TABLE IF NOT EXISTS "idem"."records" (
	//     namespace        text        NOT NULL,
	//     scope            text        NOT NULL DEFAULT '',
	//     key_value        text        NOT NULL,
	//     request_hash     bytea       NOT NULL,
	//     request_payload  jsonb       NOT NULL,
	//     status           text        NOT NULL
	//                      CHECK (status IN ('in_progress', 'committed', 'failed_permanent')),
	//     result_payload   json,
	//     error_payload    jsonb,
	//     owner_token      text        NOT NULL,
	//     fence            bigint      NOT NULL CHECK (fence >= 1),
	//     created_at       timestamptz NOT NULL,
	//     expires_at       timestamptz NOT NULL,
	//     lease_expires_at timestamptz,
	//     PRIMARY KEY (namespace, scope, key_value),
	//     CHECK ((status = 'in_progress') = (lease_expires_at IS NOT NULL)),
	//     CHECK ((status = 'committed') = (result_payload IS NOT NULL)),
	//     CHECK ((status = 'failed_permanent') = (error_payload IS NOT NULL))
	// );
	//
	// -- PurgeExpired deletes by expires_at, oldest first, within a namespace, so
	// -- namespace leads: with expires_at first, each of its batches walked the
	// -- expired records of every other namespace not purged yet. The column is
	// -- indexed in the "C" collation, which only PurgeExpired names: the point
	// -- lookups compare namespace in the column's collation and cannot use this
	// -- index, so that a generic plan made while the table is new and has no
	// -- statistics never prefers it to the primary key (and walks the whole
	// -- namespace). Equality is the same in both: the column's collation, the
	// -- database's, is deterministic. On a large table, which CREATE INDEX blocks writes to
	// -- while it builds, the index can be built first with CREATE INDEX
	// -- CONCURRENTLY under this name and definition: this statement then finds it.
	// CREATE INDEX IF NOT EXISTS "records_purge_idx" ON "idem"."records" (namespace COLLATE "C", expires_at);
	//
	// -- Earlier versions indexed expiry under other names: version 1 as
	// -- (namespace, expires_at), version 2 as (expires_at, namespace). 001 now
	// -- creates the index that replaces them both.
	// DROP INDEX IF EXISTS "idem"."records_expires_idx";
	// DROP INDEX IF EXISTS "idem"."records_expiry_idx";
}

// A store for a server with many concurrent requests: the calls that wait
// for a connection go out together in pipeline mode. (Compiled, not run.)
func ExampleConfig_pipeline() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@localhost/app")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	store, err := pgstore.New(pool, pgstore.Config{
		Pipeline:      true,
		PipelineLanes: 4,  // batches on the wire at once (the default)
		PipelineDepth: 16, // calls per batch at most (the default)
	})
	if err != nil {
		log.Fatal(err)
	}
	_ = store // use it like any lease-mode store
}
