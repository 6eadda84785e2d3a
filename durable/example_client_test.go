package durable_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/http"
	"time"

	"github.com/idemgo/idem/durable"
)

// NewFSM checks a definition before any database is involved: an invalid
// one is a *ConfigError naming the field, which matches ErrInvalidConfig.
func ExampleNewFSM() {
	_, err := durable.NewFSM(durable.FSMConfig[Order]{
		Name:    "checkout",
		Initial: "reserve",
		Steps: map[string]durable.StepFunc[Order]{
			"charge": func(ctx context.Context, s *durable.Step[Order]) (durable.Outcome, error) {
				return durable.Done(nil), nil
			},
		},
	})
	var ce *durable.ConfigError
	fmt.Println(errors.Is(err, durable.ErrInvalidConfig), errors.As(err, &ce) && ce.Field == "FSMConfig.Initial")
	fmt.Println(err)
	// Output:
	// true true
	// durable: FSMConfig.Initial "reserve" is not in Steps
}

// errDeclined is a failure no retry will fix.
var errDeclined = errors.New("card declined")

// An error handler decides what a failed step does: here a declined card
// stops the instance at once, and a panic (of the step, or of its state's
// JSON methods) is logged and stops it too. Any other error it leaves to
// the default handling by returning the zero Outcome: retried after the
// FSM's Backoff (DefaultBackoff here), five attempts at most
// (MaxAttempts), then the instance stopped with the error's text.
func ExampleErrorHandler() {
	onError := func(ctx context.Context, s *durable.Step[Order], err error) durable.Outcome {
		var pe *durable.PanicError
		switch {
		case errors.Is(err, errDeclined):
			return durable.Stop("payment declined")
		case errors.As(err, &pe):
			log.Printf("step %s: %s panicked: %v", s.Name, pe.What, pe.Value)
			return durable.Stop("bug: " + err.Error())
		}
		return durable.Outcome{} // the default handling
	}
	_ = durable.FSMConfig[Order]{OnError: onError, MaxAttempts: 5} // as the FSM's OnError

	// The engine calls it with the failed step; here, by hand.
	decide := func(err error) string {
		out := onError(context.Background(), &durable.Step[Order]{Name: "charge", Attempt: 1}, err)
		if out.Kind() == "" {
			return "default handling"
		}
		return out.String()
	}
	fmt.Println(decide(errDeclined))
	fmt.Println(decide(errors.New("timeout")))
	// Output:
	// stop(payment declined)
	// default handling
}

// A step woken by a signal reads its payload from Step.Awaited, as JSON.
func ExampleAwait() {
	type Payment struct {
		Ref    string `json:"ref"`
		Amount int    `json:"amount"`
	}
	steps := map[string]durable.StepFunc[Order]{
		"reserve": func(ctx context.Context, s *durable.Step[Order]) (durable.Outcome, error) {
			return durable.Await("paid", "payment_confirmed"), nil
		},
		"paid": func(ctx context.Context, s *durable.Step[Order]) (durable.Outcome, error) {
			var p Payment
			if err := json.Unmarshal(s.Awaited[0].Payload, &p); err != nil {
				return durable.Stop("bad payment: " + err.Error()), nil
			}
			s.State.Status = "paid " + p.Ref
			return durable.Done(nil), nil
		},
	}

	// The engine runs the steps; here, "paid" by hand, as the engine would
	// after client.Signal(ctx, durable.ByKey("order:42"), "payment_confirmed",
	// Payment{Ref: "pay_1", Amount: 100}, "evt-1").
	s := &durable.Step[Order]{Name: "paid", Awaited: []durable.Signal{
		{Name: "payment_confirmed", Payload: json.RawMessage(`{"ref":"pay_1","amount":100}`)},
	}}
	out, err := steps["paid"](context.Background(), s)
	fmt.Println(out.Kind(), s.State.Status, err)
	// Output: done paid pay_1 <nil>
}

// A payment webhook signals the order it names, by its correlation key. The
// provider's event id is the dedup key, so a redelivered event is stored
// once. An order that has ended, or never existed, is ErrNoTarget: nothing
// is stored, and the webhook answers so that the provider stops retrying.
func ExampleClient_Signal() {
	var client *durable.Client // from durable.NewClient
	http.HandleFunc("POST /webhooks/payments", func(w http.ResponseWriter, r *http.Request) {
		var ev struct {
			ID      string `json:"id"`
			OrderID int    `json:"order_id"`
			Amount  int    `json:"amount"`
		}
		if err := json.NewDecoder(r.Body).Decode(&ev); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		key := fmt.Sprintf("order:%d", ev.OrderID)
		err := client.Signal(r.Context(), durable.ByKey(key), "payment_confirmed",
			map[string]int{"amount": ev.Amount}, ev.ID)
		switch {
		case errors.Is(err, durable.ErrNoTarget):
			http.Error(w, "no open order "+key, http.StatusGone)
		case err != nil:
			http.Error(w, "try again", http.StatusServiceUnavailable) // the provider retries
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	})
}

// A second Insert with an occupied correlation key inserts nothing; its
// *DuplicateError carries the id of the instance that holds the key.
func ExampleClient_Insert() {
	ctx := context.Background()
	var (
		client   *durable.Client              // from durable.NewClient
		checkout *durable.FSM[Order]          // from durable.NewFSM
		order    = Order{ID: 42, Amount: 100} // from the request
	)
	id, err := client.Insert(ctx, checkout.With(order), &durable.InsertOpts{
		CorrelationKey: fmt.Sprintf("order:%d", order.ID),
	})
	var dup *durable.DuplicateError
	switch {
	case errors.As(err, &dup):
		id = dup.ID // order 42 is already running: use that instance (0 if it just ended)
	case errors.Is(err, durable.ErrPayloadTooLarge), errors.Is(err, durable.ErrUnstorable):
		log.Printf("order %d cannot be stored: %v", order.ID, err) // bad input: do not retry
		return
	case err != nil:
		log.Printf("insert: %v", err) // the database: retry later
		return
	}
	fmt.Println("order 42 is instance", id)
}

// InsertOrSignal starts a process with its first event and signals it with
// the later ones: every event of order 42 reaches the one instance, whichever
// arrives first, even when several arrive at once.
func ExampleClient_InsertOrSignal() {
	ctx := context.Background()
	var (
		client   *durable.Client     // from durable.NewClient
		checkout *durable.FSM[Order] // from durable.NewFSM: its first step awaits "event"
	)
	event := map[string]string{"type": "item_added", "sku": "A-1"}
	id, inserted, err := client.InsertOrSignal(ctx,
		checkout.With(Order{ID: 42}),
		&durable.InsertOpts{CorrelationKey: "order:42"},
		"event", event, "evt-981") // the event's id: a redelivery is stored once
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(id, inserted)
}

// Wait returns the instance once it has ended: a process that inserted an
// order, or a test, reads its outcome without a loop of its own.
func ExampleClient_Wait() {
	var (
		client *durable.Client // from durable.NewClient; need not be started
		id     int64           // from client.Insert
	)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	in, err := client.Wait(ctx, id)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		log.Printf("instance %d has not ended within 30s", id)
		return
	case err != nil:
		log.Fatal(err) // durable.ErrNotFound: no such instance, or already collected
	}
	switch in.Status {
	case durable.StatusDone:
		fmt.Println("done:", string(in.Result))
	case durable.StatusFailed, durable.StatusCancelled:
		fmt.Println(in.Status, in.Error)
	}
}

// Get reads an instance as it is now, and the head of its inbox.
func ExampleClient_Get() {
	var (
		client *durable.Client // from durable.NewClient
		id     int64           // from client.Insert
	)
	in, err := client.Get(context.Background(), id)
	if err != nil {
		log.Fatal(err) // durable.ErrNotFound once collected
	}
	fmt.Println(in.Status, in.Step, in.InboxLen)
}
