package consumer_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgo/idem/consumer"
)

// TestConcurrentRedeliveriesOfFailingMessages: many workers redeliver a
// few messages until each is acknowledged, while every message's handler
// fails on its first run and panics on its second. A key's handler never
// runs twice at once, every failure and panic releases the key so that a
// redelivery runs it again, and once a run succeeds no delivery runs it
// again: each key's handler runs exactly three times.
func TestConcurrentRedeliveriesOfFailingMessages(t *testing.T) {
	for name, newLedger := range ledgers(t) {
		t.Run(name, func(t *testing.T) {
			const keys, workers, deliveries = 4, 8, 50
			var running, runs [keys]atomic.Int32
			c, err := consumer.New(consumer.Config[int]{
				Ledger: newLedger(),
				Key:    func(k int) (string, error) { return "msg-" + strconv.Itoa(k), nil },
				Handle: func(ctx context.Context, k int) error {
					if running[k].Add(1) != 1 {
						t.Errorf("key %d: two handlers run at once", k)
					}
					defer running[k].Add(-1)
					switch runs[k].Add(1) {
					case 1:
						return errors.New("first run fails")
					case 2:
						panic("second run panics")
					}
					return nil
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			// deliver hands k to c until it is acknowledged, as a broker
			// redelivers, recovering the handler's panic as a worker would;
			// it reports false once the test has run for a minute.
			deadline := time.Now().Add(time.Minute)
			deliver := func(k int) bool {
				for {
					acked := func() bool {
						defer func() { _ = recover() }()
						o, _ := c.Handle(context.Background(), k)
						return o.Ack()
					}()
					if acked {
						return true
					}
					if time.Now().After(deadline) {
						t.Errorf("key %d: not acknowledged within a minute", k)
						return false
					}
				}
			}
			var wg sync.WaitGroup
			for w := range workers {
				wg.Go(func() {
					for i := range deliveries {
						if !deliver((w + i) % keys) {
							return
						}
					}
				})
			}
			wg.Wait()
			for k := range keys {
				if n := runs[k].Load(); n != 3 {
					t.Errorf("key %d: handler ran %d times, want 3 (a failure, a panic, a success)", k, n)
				}
			}
		})
	}
}
