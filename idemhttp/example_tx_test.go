package idemhttp_test

import (
	"context"
	"encoding/json"
	"log"
	"net/http"
	"os"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/store/pgstore"
)

// ordersTx is the context key under which the handler finds its
// transaction.
type ordersTx struct{}

// Run each keyed POST in a PostgreSQL transaction (transaction mode): the
// handler inserts its order in the transaction, the middleware records the
// response in it, and the client gets the 201 only once both committed.
// A retry with the same key is answered from the record; a failure rolls
// the order back with the record.
func ExampleConfig_beginTx() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
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

	mw, err := idemhttp.New(idemhttp.Config{
		RequireKey: true, // requests without a key would get no transaction
		BeginTx: func(r *http.Request) (*idemhttp.Tx, error) {
			tx, err := pool.Begin(r.Context())
			if err != nil {
				return nil, err // answered 503; the handler does not run
			}
			return &idemhttp.Tx{
				Store:    store.WithTx(tx),
				Context:  context.WithValue(r.Context(), ordersTx{}, tx),
				Commit:   tx.Commit,
				Rollback: tx.Rollback,
			}, nil
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	createOrder := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx, ok := r.Context().Value(ordersTx{}).(pgx.Tx)
		if !ok { // passed through by the middleware (a GET, say): no transaction
			http.Error(w, "POST an order with an Idempotency-Key", http.StatusMethodNotAllowed)
			return
		}
		var id int64
		if err := tx.QueryRow(r.Context(), `INSERT INTO orders DEFAULT VALUES RETURNING id`).Scan(&id); err != nil {
			// Not recorded: the middleware rolls the transaction back.
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]int64{"id": id})
	})
	log.Fatal(http.ListenAndServe("127.0.0.1:8080", mw(createOrder)))
}
