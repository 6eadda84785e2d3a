// Command orders-pg is a Go service that writes its business row and the
// idempotency record in one PostgreSQL transaction (transactional mode):
// a retried POST /orders with the same Idempotency-Key creates one order,
// and a crash or rollback leaves neither the order nor the record behind.
//
//	DATABASE_URL=postgres://… go run ./examples/orders-pg --listen 127.0.0.1:9100
//	curl -si -X POST localhost:9100/orders -H 'Idempotency-Key: o-1' -d '{"sku":"book","qty":2}'
package main

import (
	"context"
	"flag"
	"log"
	"net/http"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:9100", "address to serve on")
	flag.Parse()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	svc, err := newService(ctx, pool)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("orders-pg on http://%s", *listen)
	log.Fatal(http.ListenAndServe(*listen, svc))
}
