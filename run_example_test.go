package idem_test

import (
	"context"
	"fmt"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/store/memstore"
)

// A transport serves a request under a Fresh reservation with an Owner:
// the handler runs while the lease is kept, and its encoded result is
// committed, so that a retry replays it.
func ExampleOwner() {
	ctx := context.Background()
	store, _ := memstore.New(memstore.Config{})
	key, _ := idem.ParseKey(idem.MustNamespace("rpc"), "req-1")
	req, _ := idem.NewRequest([]byte(`{"op":"charge","amount":100}`))

	for range 2 {
		o, err := store.Begin(ctx, key, req, nil)
		if err != nil {
			panic(err)
		}
		switch o.Kind {
		case idem.Fresh:
			own := idem.Owner{Store: store, Key: key, Lease: o.Lease}
			own.Run(context.WithoutCancel(ctx), func(ctx context.Context) ([]byte, bool) {
				fmt.Println("charging")
				return []byte(`{"charged":100}`), true // record it
			})
			fmt.Println("recorded:", own.Recorded, own.Err)
		case idem.PriorResult:
			fmt.Println("replayed:", string(o.Result))
		}
	}
	// Output:
	// charging
	// recorded: true <nil>
	// replayed: {"charged":100}
}
