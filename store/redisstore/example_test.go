package redisstore_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/store/redisstore"
)

// Example charges a card once per order, whatever the number of processes
// sharing the Redis server and of retries. It needs a server, so
// it is compiled but not run.
func Example() {
	client := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer client.Close()
	// For a Redis Cluster, pass redis.NewClusterClient(…) instead.

	store, err := redisstore.New(client, redisstore.Config{
		Prefix:    "shop:idem:",
		Retention: 48 * time.Hour,
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if err := store.Check(ctx); err != nil { // every server reachable, and new enough
		log.Fatal(err)
	}

	type charge struct {
		Order  string `json:"order"`
		Amount int    `json:"amount"`
	}
	type receipt struct {
		ID string `json:"id"`
	}
	key, err := idem.NewKey(idem.MustNamespace("payments"), "order-42")
	if err != nil {
		log.Fatal(err)
	}
	r, err := idem.Do(ctx, store, key, charge{Order: "42", Amount: 1999},
		func(ctx context.Context) (receipt, error) {
			return receipt{ID: "ch_1"}, nil // call the payment provider here
		}, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(r.ID)

	// Before closing the client (deferred above): let the commands of
	// callers that left be answered, and their reservations released.
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_ = store.Drain(dctx)
}

// A store whose calls from concurrent goroutines share round trips,
// through go-redis's auto-pipeliner. (Compiled, not run.)
func ExampleConfig_autoPipeline() {
	client := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer client.Close()
	store, err := redisstore.New(client, redisstore.Config{AutoPipeline: true})
	if err != nil {
		log.Fatal(err) // a *redis.Ring has no auto-pipeliner
	}
	_ = store // use it like any store
}
