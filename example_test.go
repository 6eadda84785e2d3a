package idem_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/store/memstore"
)

// Mint deterministic keys for calls to a downstream API: the same natural key
// gives the same idempotency key in every process, so a retry after a crash
// is still recognised downstream. Send Value() as the Idempotency-Key header
// (idem.HeaderName): it is 67 printable ASCII characters, a valid raw token.
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
	key, _ := idem.NewKey(idem.MustNamespace("charges"), "order-1001")
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

// Do is the one-call form: fn runs until it succeeds once per key; later
// calls with the same request get the recorded result.
func ExampleDo() {
	ctx := context.Background()
	store, _ := memstore.New(memstore.Config{})
	key, _ := idem.NewKey(idem.MustNamespace("charges"), "order-1002")
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

// Mark an error with Permanent when retrying cannot help: Do records it,
// and every retry gets it back as a *StoredError without running fn.
func ExamplePermanent() {
	ctx := context.Background()
	store, _ := memstore.New(memstore.Config{})
	key, _ := idem.NewKey(idem.MustNamespace("charges"), "order-1003")
	declined := errors.New("card declined")
	runs := 0
	doCharge := func(ctx context.Context) (charge, error) {
		runs++
		return charge{}, idem.Permanent("card.declined", declined)
	}
	_, err := idem.Do(ctx, store, key, chargeRequest{Customer: "cus_3", Amount: 100}, doCharge, nil)
	fmt.Println(errors.Is(err, declined), idem.IsPermanent(err))

	_, err = idem.Do(ctx, store, key, chargeRequest{Customer: "cus_3", Amount: 100}, doCharge, nil)
	var stored *idem.StoredError
	if errors.As(err, &stored) {
		fmt.Println("replayed:", stored.Class, stored.Message)
	}
	fmt.Println("runs:", runs)
	// Output:
	// true true
	// replayed: card.declined card declined
	// runs: 1
}

// Branch on a permanent failure's class the same way whether Do returns it
// first-hand (the error fn returned) or replays it (a *StoredError).
func ExampleErrorOf() {
	ctx := context.Background()
	store, _ := memstore.New(memstore.Config{})
	key, _ := idem.NewKey(idem.MustNamespace("charges"), "order-1005")
	req := chargeRequest{Customer: "cus_5", Amount: 100}
	doCharge := func(ctx context.Context) (charge, error) {
		return charge{}, idem.Permanent("card.declined", errors.New("card declined"))
	}
	for range 2 {
		_, err := idem.Do(ctx, store, key, req, doCharge, nil)
		var stored *idem.StoredError
		fmt.Println(idem.ErrorOf(err).Class, idem.IsPermanent(err), errors.As(err, &stored))
	}
	// Output:
	// card.declined true false
	// card.declined true true
}

// Do answers a call it cannot run with a typed error: the key in flight
// elsewhere (retry after RetryAfter), or reused for another request.
func ExampleDo_errors() {
	ctx := context.Background()
	store, _ := memstore.New(memstore.Config{})
	key, _ := idem.NewKey(idem.MustNamespace("charges"), "order-1004")
	req := chargeRequest{Customer: "cus_4", Amount: 300}

	// Another process holds the key.
	r, _ := idem.NewTyped[chargeRequest, charge](store, nil).Request(req)
	held, _ := store.Begin(ctx, key, r, nil)

	noRun := func(ctx context.Context) (charge, error) { panic("not reached") }
	_, err := idem.Do(ctx, store, key, req, noRun, nil)
	var inFlight *idem.InFlightError
	fmt.Println(errors.Is(err, idem.ErrInFlight), errors.As(err, &inFlight) && inFlight.RetryAfter > 0)

	_ = store.Commit(ctx, key, held.Lease, []byte(`{"id":"ch_4","amount":300}`))
	_, err = idem.Do(ctx, store, key, chargeRequest{Customer: "cus_4", Amount: 999}, noRun, nil)
	fmt.Println(errors.Is(err, idem.ErrMismatch))

	c, err := idem.Do(ctx, store, key, req, noRun, nil)
	fmt.Println(c.ID, err)
	// Output:
	// true true
	// true
	// ch_4 <nil>
}

// Keep a lease while long work runs outside Do, and stop the work when the
// key is taken over.
func ExampleKeepAlive() {
	ctx := context.Background()
	store, _ := memstore.New(memstore.Config{})
	key, _ := idem.ParseKey(idem.MustNamespace("jobs"), "nightly-report")
	req, _ := idem.NewRequest([]byte(`{"report":"nightly"}`))
	o, err := store.Begin(ctx, key, req, &idem.BeginOpts{Lease: time.Minute})
	if err != nil || o.Kind != idem.Fresh {
		panic(fmt.Sprint(o.Kind, err))
	}

	workCtx, cancel := context.WithCancelCause(ctx)
	stop := idem.KeepAlive(workCtx, store, key, o.Lease, 0, func() { cancel(idem.ErrLeaseLost) })
	result := []byte(`{"rows":42}`) // the long work, watching workCtx
	stop()
	cancel(nil)

	if err := store.Commit(ctx, key, o.Lease, result); err != nil {
		panic(err)
	}
	rec, _ := store.Get(ctx, key)
	fmt.Println(rec.Status, string(rec.Result))
	// Output:
	// committed {"rows":42}
}

// Read the Idempotency-Key header of an HTTP request: none, one, or (an
// error) several.
func ExampleParseHeader() {
	ns := idem.MustNamespace("http")
	h := http.Header{}
	_, err := idem.ParseHeader(ns, h.Values(idem.HeaderName))
	fmt.Println(errors.Is(err, idem.ErrKeyMissing))

	h.Set(idem.HeaderName, `"a4f1c2"`)
	k, err := idem.ParseHeader(ns, h.Values(idem.HeaderName))
	fmt.Println(k.Value(), err)

	h.Add(idem.HeaderName, "b5e2d3")
	_, err = idem.ParseHeader(ns, h.Values(idem.HeaderName))
	fmt.Println(errors.Is(err, idem.ErrKeyMultiple))
	// Output:
	// true
	// a4f1c2 <nil>
	// true
}
