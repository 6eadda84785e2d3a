package consumer_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/idemgo/idem/consumer"
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
