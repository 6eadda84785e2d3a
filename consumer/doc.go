// Package consumer de-duplicates message handlers: wrap a handler once, and
// a message delivered twice (a broker's redelivery, a producer's retry) has
// its effects once.
//
// The order is the one that never loses a message: claim the message's key,
// run the handler, then mark the key done; when the handler fails, release
// the key so that the redelivery runs it again. (Marking before handling
// would swallow a message whose handler failed.)
//
//	tr := tracker.New(tracker.Config{TTL: time.Hour})
//	tr.Start() // an unstarted tracker fails open: it lets every duplicate through
//	defer tr.Stop()
//	c, _ := consumer.New(consumer.Config[Order]{
//		Ledger: consumer.TrackerLedger(tr, "orders"),   // one process
//		// Ledger: consumer.StoreLedger(store, ns, nil), // many processes
//		Key:    func(o Order) (string, error) { return o.EventID, nil },
//		Handle: applyOrder,
//	})
//	for msg := range deliveries {
//		outcome, err := c.Handle(ctx, msg.Order)
//		if outcome.Ack() {
//			msg.Ack()
//		} else {
//			msg.Nack(err) // redelivered later
//		}
//	}
//
// Handle's outcome tells the broker loop what to do:
//
//   - Handled: the handler ran and succeeded — acknowledge.
//   - Duplicate: handled before — acknowledge without running it again.
//   - InProgress: a concurrent delivery of the same key is being handled
//     right now — do not acknowledge; if that delivery fails, this one must
//     still run, so it is left for redelivery, never silently dropped.
//     With the ledgers of this package, Handle's error is also an
//     *idem.InFlightError whose RetryAfter is the rest of the other
//     delivery's lease (StoreLedger) or reservation (TrackerLedger): delay
//     the redelivery by that, rather than spin on a key still held.
//   - Failed: the handler returned an error (or panicked: the panic goes
//     on) — the key was released; do not acknowledge, so that the broker
//     redelivers and the handler runs again. A handler that ends its
//     goroutine (runtime.Goexit, as t.FailNow does) releases the key too.
//     No failure is recorded, not even one marked idem.Permanent (which
//     idem.Do records): a message that can never succeed is redelivered
//     and handled again for as long as the broker redelivers it, so bound
//     that with the broker's redelivery limit or dead-letter queue.
//
// With StoreLedger, the claim is a lease that heartbeats extend while the
// handler runs; when it is lost (another consumer took the key over after
// it lapsed, or the store could not be reached for as long as it lasts),
// the handler's context is cancelled with cause idem.ErrLeaseLost.
//
// Settling the key after the handler (Complete, or Release) is bounded by
// Config.SettleTimeout, 10 seconds by default, so a store that stops
// answering fails the message instead of holding its goroutine.
//
// Plugging it into a broker: call Handle from the receive loop (or from each
// worker of a pool) with the decoded message, and map the outcome to the
// broker's acknowledgement: Kafka — commit the offset only when Ack is
// true, otherwise stop and re-consume from it; SQS or Pub/Sub — delete or
// ack when Ack is true, otherwise let the visibility timeout or the ack
// deadline redeliver; RabbitMQ or NATS JetStream — ack, or nack with
// requeue (a delay, if the broker has one, keeps an InProgress duplicate
// from spinning). The delay for InProgress, when the ledger knows it:
//
//	outcome, err := c.Handle(ctx, msg.Order)
//	var inFlight *idem.InFlightError
//	switch {
//	case outcome.Ack():
//		msg.Ack()
//	case errors.As(err, &inFlight): // InProgress
//		msg.NackWithDelay(inFlight.RetryAfter) // or set the visibility timeout
//	default:
//		msg.Nack(err)
//	}
//
// Two ledgers come with the package: TrackerLedger keeps keys in an
// in-process tracker.Tracker (one consumer process, no I/O per message),
// StoreLedger keeps them in an idem.Store (memory, SQLite, Postgres, Redis),
// shared by every consumer process.
package consumer
