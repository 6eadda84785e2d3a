package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/consumer"
	"github.com/idemgo/idem/store/memstore"
	"github.com/idemgo/idem/tracker"
)

type event struct {
	ID     string
	Amount int
}

// A broker loop: acknowledge what Handle says to acknowledge, leave the
// rest for redelivery.
func Example() {
	tr := tracker.New(tracker.Config{})
	tr.Start()
	defer tr.Stop()

	balance, attempts := 0, 0
	c, _ := consumer.New(consumer.Config[event]{
		Ledger: consumer.TrackerLedger(tr, "payments"),
		Key:    func(e event) (string, error) { return e.ID, nil },
		Handle: func(ctx context.Context, e event) error {
			attempts++
			if attempts == 1 {
				return errors.New("database hiccup") // fails once
			}
			balance += e.Amount
			return nil
		},
	})

	// The broker delivers evt-1 four times: a failure, a success, two
	// duplicates.
	for range 4 {
		outcome, err := c.Handle(context.Background(), event{ID: "evt-1", Amount: 100})
		fmt.Printf("%-9s ack=%-5v err=%v\n", outcome, outcome.Ack(), err)
	}
	fmt.Println("balance:", balance)
	// Output:
	// failed    ack=false err=database hiccup
	// handled   ack=true  err=<nil>
	// duplicate ack=true  err=<nil>
	// duplicate ack=true  err=<nil>
	// balance: 100
}

// Consumers in several processes share one idem.Store (Postgres, Redis,
// SQLite; memory here): a message redelivered to another process is a
// Duplicate there.
func ExampleStoreLedger() {
	store, _ := memstore.New(memstore.Config{}) // every process: the same database
	ns := idem.MustNamespace("payments")
	applied := 0
	newConsumer := func() *consumer.Consumer[event] {
		c, err := consumer.New(consumer.Config[event]{
			Ledger: consumer.StoreLedger(store, ns, &consumer.StoreLedgerOpts{Retention: 7 * 24 * time.Hour}),
			Key:    func(e event) (string, error) { return e.ID, nil },
			Handle: func(ctx context.Context, e event) error { applied += e.Amount; return nil },
		})
		if err != nil {
			panic(err)
		}
		return c
	}
	processA, processB := newConsumer(), newConsumer()

	outcome, err := processA.Handle(context.Background(), event{ID: "evt-7", Amount: 100})
	fmt.Println("A:", outcome, err)
	outcome, err = processB.Handle(context.Background(), event{ID: "evt-7", Amount: 100}) // redelivered to B
	fmt.Println("B:", outcome, err)
	outcome, err = processB.Handle(context.Background(), event{ID: ""}) // a message without an id
	fmt.Println("B:", outcome, errors.Is(err, idem.ErrInvalidKey))
	fmt.Println("applied:", applied)
	// Output:
	// A: handled <nil>
	// B: duplicate <nil>
	// B: failed true
	// applied: 100
}

// A broker loop that delays the redelivery of a message whose key another
// consumer is handling by what is left of that consumer's lease, instead of
// redelivering it at once to find the key still held.
func ExampleConsumer_Handle_inProgress() {
	// A clock that stands still, so that the output is the same on every run.
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	store, _ := memstore.New(memstore.Config{Now: func() time.Time { return now }})
	started, finish := make(chan struct{}), make(chan struct{})
	c, _ := consumer.New(consumer.Config[event]{
		Ledger: consumer.StoreLedger(store, idem.MustNamespace("payments"), &consumer.StoreLedgerOpts{Lease: 30 * time.Second}),
		Key:    func(e event) (string, error) { return e.ID, nil },
		Handle: func(ctx context.Context, e event) error {
			close(started)
			<-finish // a slow handler
			return nil
		},
	})

	deliver := func(who string, e event) {
		outcome, err := c.Handle(context.Background(), e)
		var inFlight *idem.InFlightError
		switch {
		case outcome.Ack():
			fmt.Printf("%s: %s, ack\n", who, outcome)
		case errors.As(err, &inFlight):
			fmt.Printf("%s: %s, nack with a delay of %v\n", who, outcome, inFlight.RetryAfter)
		default:
			fmt.Printf("%s: %s, nack: %v\n", who, outcome, err)
		}
	}

	aDone := make(chan struct{})
	go func() {
		defer close(aDone)
		deliver("A", event{ID: "evt-9", Amount: 100})
	}()
	<-started
	deliver("B", event{ID: "evt-9", Amount: 100}) // redelivered while A handles it
	close(finish)
	<-aDone
	deliver("B", event{ID: "evt-9", Amount: 100}) // redelivered after the delay
	// Output:
	// B: in_progress, nack with a delay of 30s
	// A: handled, ack
	// B: duplicate, ack
}
