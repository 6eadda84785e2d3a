package memstore_test

import (
	"context"
	"fmt"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/store/memstore"
)

func Example() {
	ctx := context.Background()
	store, err := memstore.New(memstore.Config{}) // 24h retention, 30s leases
	if err != nil {
		panic(err)
	}
	key, _ := idem.ParseKey(idem.MustNamespace("jobs"), "job-7")
	req, _ := idem.NewRequest([]byte(`{"report":"monthly"}`))

	o, _ := store.Begin(ctx, key, req, nil)
	fmt.Println(o.Kind, o.Lease.Fence)
	_ = store.Commit(ctx, key, o.Lease, []byte(`{"rows":42}`))

	o, _ = store.Begin(ctx, key, req, nil)
	fmt.Println(o.Kind, string(o.Result))
	// Output:
	// fresh 1
	// prior_result {"rows":42}
}
