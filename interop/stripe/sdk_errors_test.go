package stripeinterop

import (
	"context"
	"errors"
	"testing"

	stripe "github.com/stripe/stripe-go/v85"
)

// TestSDKKeyReusedWithOtherParametersIsAnIdempotencyError: a key reused
// with other parameters reaches the SDK as Stripe answers it: a 400 whose
// body is a Stripe error of type idempotency_error, which the SDK decodes
// into a *stripe.Error and does not retry. A body of another shape is, for
// the SDK, a failure of unknown kind: it retries it twice, with its backoff
// (1.5 s), and its caller gets an error it cannot tell from a network
// failure. (The SDK itself refuses a key over 255 characters before
// sending it.)
func TestSDKKeyReusedWithOtherParametersIsAnIdempotencyError(t *testing.T) {
	api := newFakeStripe(t)
	relay := newLossyRelay(t, newProxy(t, api.srv.URL), 0)
	sc, sdkLog := newSDKClient(t, relay.srv.URL)

	const key = "order-42"
	p := chargeParams()
	p.SetIdempotencyKey(key)
	if _, err := sc.V1Charges.Create(context.Background(), p); err != nil {
		t.Fatalf("first Charges.Create: %v", err)
	}
	p = chargeParams()
	p.Amount = stripe.Int64(3000)
	p.SetIdempotencyKey(key)
	_, err := sc.V1Charges.Create(context.Background(), p)

	if n := sdkLog.retries(); n != 0 || len(relay.keys()) != 2 {
		t.Errorf("the SDK retried the refusal %d times (%d requests in all), want no retry", n, len(relay.keys()))
	}
	if total := api.total(); total != 1 {
		t.Errorf("the API ran %d times, want 1", total)
	}
	var se *stripe.Error
	if !errors.As(err, &se) {
		t.Fatalf("Charges.Create: error %v (%T), want a *stripe.Error", err, err)
	}
	if se.HTTPStatusCode != 400 || se.Type != stripe.ErrorTypeIdempotency || se.Msg == "" {
		t.Errorf("Charges.Create: status %d type %q message %q, want 400 %q and a message", se.HTTPStatusCode, se.Type, se.Msg, stripe.ErrorTypeIdempotency)
	}
	var ie *stripe.IdempotencyError
	if !errors.As(err, &ie) {
		t.Errorf("Charges.Create: error %v does not unwrap to a *stripe.IdempotencyError", err)
	}
}

// TestSDKConcurrentCallsWithOneKeyRunOnce: two calls of the SDK with the
// same key at once, the second while the first runs: the second gets 409,
// which the SDK retries by itself, and then the first one's charge, the
// API having run once.
func TestSDKConcurrentCallsWithOneKeyRunOnce(t *testing.T) {
	api := newFakeStripe(t)
	api.hold = make(chan struct{})
	api.started = make(chan struct{}, 1)
	relay := newLossyRelay(t, newProxy(t, api.srv.URL), 0)
	relay.answered = make(chan int, 8)
	sc, sdkLog := newSDKClient(t, relay.srv.URL)

	const key = "order-43"
	type result struct {
		ch  *stripe.Charge
		err error
	}
	create := func(out chan<- result) {
		p := chargeParams()
		p.SetIdempotencyKey(key)
		ch, err := sc.V1Charges.Create(context.Background(), p)
		out <- result{ch, err}
	}
	first, second := make(chan result, 1), make(chan result, 1)
	go create(first)
	<-api.started // the first call runs in the API, holding the key
	go create(second)
	if status := <-relay.answered; status != 409 {
		close(api.hold)
		t.Fatalf("the call made while the first ran got %d, want 409", status)
	}
	close(api.hold)

	a, b := <-first, <-second
	if a.err != nil || b.err != nil {
		t.Fatalf("Charges.Create: %v, %v (SDK log: %q)", a.err, b.err, sdkLog.lines())
	}
	if sdkLog.retries() < 1 {
		t.Errorf("the SDK logged no retry of the 409: %q", sdkLog.lines())
	}
	ids := api.executions(key)
	if len(ids) != 1 || api.total() != 1 {
		t.Fatalf("the API ran %d times (%d for key %q), want once", api.total(), len(ids), key)
	}
	if a.ch.ID != ids[0] || b.ch.ID != ids[0] {
		t.Errorf("the calls got charges %q and %q, want both %q", a.ch.ID, b.ch.ID, ids[0])
	}
	if b.ch.LastResponse == nil || b.ch.LastResponse.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("the second call's answer was not a replay: %+v", b.ch.LastResponse)
	}
}
