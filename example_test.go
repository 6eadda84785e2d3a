package idem_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/store/memstore"
)

// Mint deterministic keys for calls to a downstream API: the same natural key
// gives the same idempotency key in every process, so a retry after a crash
// is still recognised downstream.
func ExampleMinter() {
	minter, err := idem.NewMinter(idem.MustNamespace("email-job"))
	if err != nil {
		panic(err)
	}
	k1, _ := minter.Mint("tenant-1", "invoice-42", "send")
	k2, _ := minter.Mint("tenant-1", "invoice-42", "send")
	fmt.Println(k1.Value() == k2.Value())
	fmt.Println(k1.Value())
	_, err = minter.Mint("tenant-1", " ")
	fmt.Println(errors.Is(err, idem.ErrInvalidParts))
	// Output:
	// true
	// m1:fb2b396773bff7b8e88fd95a9f9afa31323a1122e98d1a61e16fdd54eb1c44e3
	// true
}

// Parse the Idempotency-Key header: raw tokens and RFC 8941 sf-strings give
// the same key; bad values give precise, typed errors.
func ExampleParseKey() {
	ns := idem.MustNamespace("http")
	raw, _ := idem.ParseKey(ns, "8e03978e-40d5")
	quoted, _ := idem.ParseKey(ns, `"8e03978e-40d5"`)
	fmt.Println(raw == quoted, raw.Value())

	_, err := idem.ParseKey(ns, `"unterminated`)
	fmt.Println(errors.Is(err, idem.ErrInvalidKey), errors.Is(err, idem.ErrKeyMalformed))
	fmt.Println(err)
	// Output:
	// true 8e03978e-40d5
	// true true
	// idem: invalid idempotency key: sf-string has no closing quote
}

type chargeRequest struct {
	Customer string `json:"customer"`
	Amount   int    `json:"amount"`
}

type charge struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"`
}

// Use the typed view when you need every outcome: run on Fresh, replay on
// PriorResult, reject Mismatch, back off on InFlight.
func ExampleTyped() {
	ctx := context.Background()
	store, _ := memstore.New(memstore.Config{})
	charges := idem.NewTyped[chargeRequest, charge](store, nil)
	key, _ := idem.ParseKey(idem.MustNamespace("charges"), "order-1001")
	req := chargeRequest{Customer: "cus_1", Amount: 500}

	for attempt := 1; attempt <= 2; attempt++ {
		o, err := charges.Begin(ctx, key, req, nil)
		if err != nil {
			panic(err)
		}
		switch o.Kind {
		case idem.Fresh:
			c := charge{ID: "ch_1", Amount: req.Amount} // the real work
			if err := charges.Commit(ctx, key, o.Lease, c); err != nil {
				panic(err)
			}
			fmt.Println("attempt", attempt, "charged", c.ID)
		case idem.PriorResult:
			fmt.Println("attempt", attempt, "replayed", o.Result.ID)
		default:
			fmt.Println("attempt", attempt, "rejected:", o.Err())
		}
	}

	o, _ := charges.Begin(ctx, key, chargeRequest{Customer: "cus_1", Amount: 900}, nil)
	fmt.Println(o.Kind, errors.Is(o.Err(), idem.ErrMismatch))
	// Output:
	// attempt 1 charged ch_1
	// attempt 2 replayed ch_1
	// mismatch true
}

// Do is the one-call form: fn runs at most once per key; later calls with
// the same request get the recorded result.
func ExampleDo() {
	ctx := context.Background()
	store, _ := memstore.New(memstore.Config{})
	key, _ := idem.ParseKey(idem.MustNamespace("charges"), "order-1002")
	req := chargeRequest{Customer: "cus_2", Amount: 700}
	runs := 0
	doCharge := func(ctx context.Context) (charge, error) {
		runs++
		return charge{ID: "ch_2", Amount: req.Amount}, nil
	}
	for range 3 {
		c, err := idem.Do(ctx, store, key, req, doCharge, nil)
		if err != nil {
			panic(err)
		}
		fmt.Println(c.ID, c.Amount)
	}
	fmt.Println("runs:", runs)
	// Output:
	// ch_2 700
	// ch_2 700
	// ch_2 700
	// runs: 1
}
