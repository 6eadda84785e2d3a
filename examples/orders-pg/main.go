// Command orders-pg is a Go service that writes its business row and the
// idempotency record in one PostgreSQL transaction (transactional mode,
// the idemhttp middleware with Config.BeginTx):
// a retried POST /orders with the same Idempotency-Key creates one order
// (the retry gets it back marked Idempotent-Replayed: true), and a crash or
// rollback leaves neither the order nor the record behind.
//
//	DATABASE_URL=postgres://… go run ./examples/orders-pg --listen 127.0.0.1:9100
//	curl -si -X POST localhost:9100/orders -H 'Idempotency-Key: o-1' -d '{"sku":"book","qty":2}'
//
// SIGTERM or Ctrl-C stops it gracefully: requests in flight finish, for up
// to --shutdown-timeout, before it exits (with 1 if some were still
// running then: they are cut off, and their transactions, order and
// record, rolled back); a second signal stops it at once.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:9100", "address to serve on")
	drain := flag.Duration("shutdown-timeout", 30*time.Second, "how long in-flight requests may finish after SIGTERM or SIGINT")
	flag.Parse()
	log.SetPrefix("orders-pg: ")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // a second signal ends the process at once
	}()
	if err := run(ctx, *listen, os.Getenv("DATABASE_URL"), *drain); err != nil {
		log.Fatal(err)
	}
}

// run serves orders on listen, keeping them in the database dbURL names,
// until ctx ends; then it lets the requests in flight finish, for up to
// drain. When some are still running after drain it returns at once,
// leaving them their connections (closing the pool would wait for them):
// the caller is to exit, which cuts them off, and PostgreSQL rolls their
// transactions back, the order with its idempotency record.
func run(ctx context.Context, listen, dbURL string, drain time.Duration) error {
	if dbURL == "" {
		return errors.New("DATABASE_URL is not set: set it to the PostgreSQL database to keep the orders in, e.g. DATABASE_URL=postgres://localhost/orders")
	}
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return err
	}
	closePool := true
	defer func() {
		if closePool {
			pool.Close()
		}
	}()
	svc, err := newService(ctx, pool)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: svc, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.Printf("serving on http://%s", ln.Addr())

	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	log.Printf("shutting down: waiting up to %s for in-flight requests", drain)
	sctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		closePool = false
		return fmt.Errorf("shutdown: requests still running after %s were cut off: %w", drain, err)
	}
	return nil
}
