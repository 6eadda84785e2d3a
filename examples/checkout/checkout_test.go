package main

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/idemgo/idem/internal/pgtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(pgtest.Wrap(m)) }

// TestCheckoutChargesOnce runs the command's flow with a payment API that
// loses the response of its first charges: the charge step fails and is
// retried, every retry sends the key of the first attempt, and the order
// is charged once.
func TestCheckoutChargesOnce(t *testing.T) {
	t.Parallel()
	for name, lost := range map[string]int{"no failure": 0, "first response lost": 1, "three responses lost": 3} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			pool, err := pgxpool.New(ctx, pgtest.URL(t))
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			api := newProvider()
			api.FailAfterCharge(lost)

			got, err := checkout(ctx, pool, api, slog.New(slog.NewTextHandler(io.Discard, nil)), order{ID: "42", Amount: 1999})
			if err != nil {
				t.Fatal(err)
			}
			if want := (receipt{Order: "42", Charge: "ch_1", Amount: 1999}); got != want {
				t.Fatalf("receipt %+v, want %+v", got, want)
			}
			if n := api.Charges(); n != 1 {
				t.Fatalf("%d charges, want 1", n)
			}
			key, err := keys.Mint("order", "42", "charge")
			if err != nil {
				t.Fatal(err)
			}
			requests := api.Requests()
			if len(requests) != lost+1 {
				t.Fatalf("%d charge requests, want %d (one per attempt)", len(requests), lost+1)
			}
			for i, k := range requests {
				if k != key.Value() {
					t.Fatalf("request %d sent key %q, want %q, minted from the order id", i, k, key.Value())
				}
			}
			var attempt int
			if err := pool.QueryRow(ctx, `SELECT attempt FROM durable_instance WHERE correlation_key = 'order:42'`).Scan(&attempt); err != nil {
				t.Fatal(err)
			}
			if attempt != lost+1 {
				t.Fatalf("the charge step committed at attempt %d, want %d", attempt, lost+1)
			}
		})
	}
}
