package sqlitestore_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"
	"path/filepath"

	_ "modernc.org/sqlite" // the cgo-free driver, registered as "sqlite"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/store/sqlitestore"
)

// Open a database file with the recommended settings, create the schema, and
// run an operation once: the retry replays the stored result.
func Example() {
	dir, err := os.MkdirTemp("", "idem-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	db, err := sql.Open("sqlite", filepath.Join(dir, "idem.db")+
		"?_pragma=busy_timeout(5000)"+
		"&_pragma=journal_mode(WAL)"+
		"&_pragma=synchronous(FULL)"+
		"&_pragma=foreign_keys(ON)"+
		"&_pragma=journal_size_limit(16777216)"+
		"&_txlock=immediate")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // lease mode only

	ctx := context.Background()
	store, err := sqlitestore.New(db, sqlitestore.Config{})
	if err != nil {
		log.Fatal(err)
	}
	if err := store.Migrate(ctx); err != nil {
		log.Fatal(err)
	}

	key, err := idem.ParseKey(idem.MustNamespace("payments"), "order-1042")
	if err != nil {
		log.Fatal(err)
	}
	req, err := idem.NewRequest([]byte(`{"amount":100,"currency":"EUR"}`))
	if err != nil {
		log.Fatal(err)
	}
	for attempt := 1; attempt <= 2; attempt++ {
		o, err := store.Begin(ctx, key, req, nil)
		if err != nil {
			log.Fatal(err)
		}
		switch o.Kind {
		case idem.Fresh:
			// Do the work, then record its result.
			if err := store.Commit(ctx, key, o.Lease, []byte(`{"charge":"ch_1"}`)); err != nil {
				log.Fatal(err)
			}
			fmt.Printf("attempt %d: charged\n", attempt)
		case idem.PriorResult:
			fmt.Printf("attempt %d: replayed %s\n", attempt, o.Result)
		default:
			fmt.Printf("attempt %d: %v\n", attempt, o.Err())
		}
	}
	// Output:
	// attempt 1: charged
	// attempt 2: replayed {"charge":"ch_1"}
}

// In transactional mode the record commits or rolls back with the caller's
// own writes.
func ExampleStore_WithTx() {
	dir, err := os.MkdirTemp("", "idem-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", filepath.Join(dir, "idem.db")+
		"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=foreign_keys(ON)&_pragma=journal_size_limit(16777216)&_txlock=immediate")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(4) // transactions hold a connection each

	ctx := context.Background()
	store, err := sqlitestore.New(db, sqlitestore.Config{})
	if err != nil {
		log.Fatal(err)
	}
	if err := store.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE ledger (entry TEXT NOT NULL)`); err != nil {
		log.Fatal(err)
	}
	key, _ := idem.ParseKey(idem.MustNamespace("ledger"), "transfer-7")
	req, _ := idem.NewRequest([]byte(`{"from":"a","to":"b","amount":5}`))

	// post books the transfer once: the ledger row and the idempotency
	// record are written in one transaction.
	post := func(fail bool) {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			log.Fatal(err)
		}
		defer tx.Rollback()
		s := store.WithTx(tx)
		o, err := s.Begin(ctx, key, req, nil)
		if err != nil {
			log.Fatal(err)
		}
		if o.Kind != idem.Fresh {
			fmt.Println("already posted:", o.Kind)
			return
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO ledger VALUES ('a->b 5')`); err != nil {
			log.Fatal(err)
		}
		if err := s.Commit(ctx, key, o.Lease, []byte(`{"posted":true}`)); err != nil {
			log.Fatal(err)
		}
		if fail {
			fmt.Println("crashed before commit: rolled back")
			return // the deferred Rollback undoes the row and the record
		}
		if err := tx.Commit(); err != nil {
			log.Fatal(err)
		}
		fmt.Println("posted")
	}
	post(true)
	post(false)
	post(false)

	var rows int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM ledger`).Scan(&rows); err != nil {
		log.Fatal(err)
	}
	fmt.Println("ledger rows:", rows)
	// Output:
	// crashed before commit: rolled back
	// posted
	// already posted: prior_result
	// ledger rows: 1
}
