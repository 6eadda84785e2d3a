package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/durable"
)

// order is the state of a checkout instance.
type order struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"` // in cents
	Charge string `json:"charge,omitempty"`
}

// receipt is the result of a finished checkout.
type receipt struct {
	Order  string `json:"order"`
	Charge string `json:"charge"`
	Amount int    `json:"amount"`
}

// keys mints the idempotency keys of the checkout's effects.
var keys = mustMinter(idem.MustNamespace("checkout"))

func mustMinter(ns idem.Namespace) *idem.Minter {
	m, err := idem.NewMinter(ns)
	if err != nil {
		panic(err)
	}
	return m
}

// correlationKey is the business identity of the checkout of order id:
// signals address the instance by it.
func correlationKey(id string) string { return "order:" + id }

// newCheckout defines the checkout FSM. An order waits for the
// payment_confirmed signal, then charges it through the payment API at
// api, and ends with a receipt.
//
// The charge is the step that matters: a step runs at least once, so it
// may run again after a failure, a crash or a lost lease. Its
// Idempotency-Key is minted from the order id alone, the same on every
// attempt, so the provider charges once and replays that charge to the
// retries.
func newCheckout(api string, hc *http.Client) (*durable.FSM[order], error) {
	return durable.NewFSM(durable.FSMConfig[order]{
		Name:    "checkout",
		Initial: "await_payment",
		Steps: map[string]durable.StepFunc[order]{
			"await_payment": func(context.Context, *durable.Step[order]) (durable.Outcome, error) {
				return durable.Await("charge", "payment_confirmed"), nil
			},
			"charge": func(ctx context.Context, s *durable.Step[order]) (durable.Outcome, error) {
				c, err := chargeOrder(ctx, hc, api, s.State)
				if err != nil {
					return durable.Outcome{}, err
				}
				s.State.Charge = c.ID
				return durable.Done(receipt{Order: s.State.ID, Charge: c.ID, Amount: c.Amount}), nil
			},
		},
		MaxAttempts: 10,
		Backoff:     func(attempt int) time.Duration { return time.Duration(attempt) * 50 * time.Millisecond },
	})
}

// chargeOrder asks the payment API to charge o, under the key minted from
// o's id.
func chargeOrder(ctx context.Context, hc *http.Client, api string, o order) (charge, error) {
	key, err := keys.Mint("order", o.ID, "charge")
	if err != nil {
		return charge{}, err
	}
	body, err := json.Marshal(charge{Order: o.ID, Amount: o.Amount})
	if err != nil {
		return charge{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, api+"/charges", bytes.NewReader(body))
	if err != nil {
		return charge{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key.Value())
	resp, err := hc.Do(req)
	if err != nil {
		return charge{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusCreated {
		return charge{}, fmt.Errorf("charge order %s: %s", o.ID, resp.Status)
	}
	var c charge
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
		return charge{}, fmt.Errorf("charge order %s: %w", o.ID, err)
	}
	return c, nil
}
