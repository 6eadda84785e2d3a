package durable_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem/durable"
)

// Order is the state of a checkout.
type Order struct {
	ID     int    `json:"id"`
	Amount int    `json:"amount"`
	Status string `json:"status"`
}

// Example defines a checkout FSM that reserves stock, waits up to a day for
// the payment signal, then ships; it runs an engine, inserts an order by its
// business key and signals it by that key, as a payment webhook would.
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	checkout, err := durable.NewFSM(durable.FSMConfig[Order]{
		Name:    "checkout",
		Initial: "reserve",
		Steps: map[string]durable.StepFunc[Order]{
			"reserve": func(ctx context.Context, s *durable.Step[Order]) (durable.Outcome, error) {
				// Reserve stock idempotently (the step may run again).
				s.State.Status = "reserved"
				return durable.AwaitTimeout("paid", 24*time.Hour, "payment_confirmed"), nil
			},
			"paid": func(ctx context.Context, s *durable.Step[Order]) (durable.Outcome, error) {
				if s.TimedOut {
					return durable.Stop("not paid within a day"), nil
				}
				s.State.Status = "paid"
				return durable.Next("ship"), nil
			},
			"ship": func(ctx context.Context, s *durable.Step[Order]) (durable.Outcome, error) {
				s.State.Status = "shipped"
				return durable.Done(map[string]int{"order": s.State.ID}), nil
			},
		},
	})
	if err != nil {
		log.Fatal(err)
	}

	client, err := durable.NewClient(pool, &durable.Config{
		FSMs:   []durable.Definition{checkout},
		Queues: map[string]durable.QueueConfig{durable.DefaultQueue: {Concurrency: 10}},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := client.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer func() {
		// A graceful stop, within the grace period a shutdown allows:
		// running steps finish and commit; those still running after 20 s
		// are cancelled (with cause durable.ErrEngineStopping) and their
		// rows handed back, to run again on another engine.
		stopCtx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := client.Stop(stopCtx); err != nil {
			log.Print(err)
		}
	}()

	id, err := client.Insert(ctx, checkout.With(Order{ID: 42, Amount: 100}),
		&durable.InsertOpts{CorrelationKey: "order:42"})
	if err != nil {
		log.Fatal(err) // errors.Is(err, durable.ErrDuplicate): order 42 is already running
	}
	fmt.Println("started instance", id)

	// Later, from a webhook that knows only the business key:
	err = client.Signal(ctx, durable.ByKey("order:42"), "payment_confirmed", map[string]int{"amount": 100}, "evt-7")
	if err != nil {
		log.Fatal(err) // errors.Is(err, durable.ErrNoTarget): no live order 42
	}
}
