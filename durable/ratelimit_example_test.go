package durable_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem/durable"
)

// Mail is the state of one e-mail to send.
type Mail struct {
	Tenant string `json:"tenant"`
	To     string `json:"to"`
}

// ExampleRateLimit sends e-mail through a provider that allows each tenant
// 10 messages a second, 20 at once after a quiet spell: one bucket per
// tenant, shared by every engine on the database. A bulk message costs 5
// tokens.
func ExampleRateLimit() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	send, err := durable.NewFSM(durable.FSMConfig[Mail]{
		Name:    "mail",
		Initial: "send",
		Steps: map[string]durable.StepFunc[Mail]{
			"send": func(ctx context.Context, s *durable.Step[Mail]) (durable.Outcome, error) {
				// Call the provider; the engine started this step only
				// once the tenant's bucket held its tokens.
				return durable.Done(nil), nil
			},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	client, err := durable.NewClient(pool, &durable.Config{
		FSMs:       []durable.Definition{send},
		Queues:     map[string]durable.QueueConfig{durable.DefaultQueue: {Concurrency: 20}},
		RateLimits: map[string]durable.RateLimit{"mail": {Limit: 10, Burst: 20}}, // per second
		Hooks: durable.Hooks{
			RateLimitUnknown: func(ev durable.RateLimitUnknownEvent) {
				log.Printf("%d instances name the unknown rate limit %q", ev.Count, ev.Name)
			},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := client.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer func() { _ = client.Stop(context.Background()) }()

	m := Mail{Tenant: "42", To: "ada@example.com"}
	if _, err := client.Insert(ctx, send.With(m), &durable.InsertOpts{
		RateLimit:       durable.RateLimitKey("mail", m.Tenant), // "mail:42"
		RateLimitWeight: 5,
	}); err != nil {
		log.Fatal(err)
	}
}

func ExampleRateLimitKey() {
	fmt.Println(durable.RateLimitKey("mail", "tenant-42"))
	// Output: mail:tenant-42
}
