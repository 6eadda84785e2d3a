// Command checkout runs an order through a durable checkout FSM on
// PostgreSQL: the order waits for a payment_confirmed signal addressed by
// its correlation key, "order:<id>", then charges a fake payment API under
// an Idempotency-Key minted from the order id, and ends with a receipt.
//
// The fake API loses the response of the first charge it makes (-fail 1,
// the default), as a timeout would: the charge step fails, is retried, and
// the retry sends the same key, so the API replays the charge it made
// instead of charging twice.
//
//	DATABASE_URL=postgres://… go run ./examples/checkout
//
// It migrates the durable tables into the first schema of the URL's
// search_path, starts an engine, inserts the order, signals it, waits for
// it to finish, prints the receipt and the number of charges, and stops.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/signal"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem/durable"
)

func main() {
	orderID := flag.String("order", "42", "the order's id")
	amount := flag.Int("amount", 1999, "the amount to charge, in cents")
	fail := flag.Int("fail", 1, "how many charges the fake payment API makes and then answers with an error")
	flag.Parse()
	log.SetPrefix("checkout: ")
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, time.Minute)
	defer cancelTimeout()

	pool, err := connect(ctx, os.Getenv("DATABASE_URL"), 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	api := newProvider()
	api.FailAfterCharge(*fail)
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	r, err := checkout(ctx, pool, api, logger, order{ID: *orderID, Amount: *amount})
	if err != nil {
		log.Fatal(err)
	}
	out, _ := json.Marshal(r)
	fmt.Printf("result: %s\n", out)
	fmt.Printf("charges: %d\n", api.Charges())
}

// checkout runs one order from start to finish on pool, against api, and
// returns its receipt: it migrates, starts an engine, inserts the order
// (or, when a live checkout of the order exists, for instance after a
// crash, resumes it), signals payment_confirmed by the order's key, waits
// for the instance to end and stops the engine.
func checkout(ctx context.Context, pool *pgxpool.Pool, api *provider, logger *slog.Logger, o order) (receipt, error) {
	srv := httptest.NewServer(api)
	defer srv.Close()
	fsm, err := newCheckout(srv.URL, srv.Client())
	if err != nil {
		return receipt{}, err
	}
	client, err := durable.NewClient(pool, &durable.Config{
		FSMs:         []durable.Definition{fsm},
		Queues:       map[string]durable.QueueConfig{durable.DefaultQueue: {Concurrency: 2}},
		PollInterval: 100 * time.Millisecond,
		Logger:       logger,
	})
	if err != nil {
		return receipt{}, err
	}
	if err := client.Migrate(ctx); err != nil {
		return receipt{}, err
	}
	if err := client.Start(ctx); err != nil {
		return receipt{}, err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = client.Stop(stopCtx)
	}()

	key := correlationKey(o.ID)
	id, err := client.Insert(ctx, fsm.With(o), &durable.InsertOpts{CorrelationKey: key})
	var dup *durable.DuplicateError
	switch {
	case errors.As(err, &dup) && dup.ID != 0:
		id = dup.ID // a live checkout of this order: resume it
	case err != nil:
		return receipt{}, err
	}
	// The payment service confirms by the order's key; it knows nothing of
	// instance ids. The dedup key makes a repeated confirmation harmless.
	if err := client.Signal(ctx, durable.ByKey(key), "payment_confirmed",
		map[string]any{"order": o.ID, "amount": o.Amount}, "payment_confirmed:"+o.ID); err != nil {
		return receipt{}, err
	}
	in, err := client.Wait(ctx, id)
	if err != nil {
		return receipt{}, fmt.Errorf("waiting for the checkout of order %s: %w", o.ID, err)
	}
	if in.Status != durable.StatusDone {
		return receipt{}, fmt.Errorf("checkout of order %s %s: %s", o.ID, in.Status, in.Error)
	}
	var r receipt
	if err := json.Unmarshal(in.Result, &r); err != nil {
		return receipt{}, err
	}
	return r, nil
}
