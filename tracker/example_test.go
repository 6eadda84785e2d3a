package tracker_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/idemgo/idem/tracker"
)

// A consumer reserves a message's key, handles the message, and completes
// the key on success or releases it on failure. A redelivery of a handled
// message is dropped; a redelivery of a failed one runs again; one that
// arrives while the message still runs is neither run nor acknowledged,
// but left for redelivery, since the running delivery may yet fail.
func Example() {
	tr := tracker.New(tracker.Config{TTL: time.Hour})
	tr.Start()
	defer tr.Stop()

	// handle runs one delivery of message id: fail says the work fails.
	handle := func(id string, fail bool) {
		if !tr.Reserve("orders", id) {
			if tr.Completed("orders", id) {
				fmt.Println(id, "duplicate of handled work: acknowledged without running")
			} else {
				// Another delivery of id still runs and may yet fail:
				// acknowledging this one could lose the message.
				fmt.Println(id, "still running elsewhere: left for redelivery")
			}
			return
		}
		if fail {
			tr.Release("orders", id) // so that the redelivery runs again
			fmt.Println(id, "failed: released")
			return
		}
		tr.Complete("orders", id)
		fmt.Println(id, "handled")
	}

	handle("m1", false)
	handle("m1", false) // redelivery
	handle("m2", true)
	handle("m2", false) // redelivery after a failure

	// A redelivery of m3 arrives while its first delivery still runs.
	tr.Reserve("orders", "m3") // the first delivery, running
	handle("m3", false)        // the redelivery
	tr.Release("orders", "m3") // the first delivery fails
	handle("m3", false)        // the redelivery, delivered again
	// Output:
	// m1 handled
	// m1 duplicate of handled work: acknowledged without running
	// m2 failed: released
	// m2 handled
	// m3 still running elsewhere: left for redelivery
	// m3 handled
}

// A retry proves it owns the key with the Token of the first attempt; a
// concurrent duplicate, which has no token, is turned away.
func ExampleTracker_Acquire() {
	tr := tracker.New(tracker.Config{})
	tr.Start()
	defer tr.Stop()

	tok, ok := tr.Acquire("payments", "pay-42")
	fmt.Println("first attempt owns the key:", ok)

	errTransient := errors.New("gateway timeout")
	for attempt := 1; ; attempt++ {
		if !tr.ReserveOwned("payments", "pay-42", tok) {
			fmt.Println("lost the key; stop")
			return
		}
		fmt.Println("duplicate delivery may run:", tr.Reserve("payments", "pay-42"))
		var err error
		if attempt == 1 {
			err = errTransient
		}
		if err == nil {
			tr.CompleteOwned("payments", "pay-42", tok)
			fmt.Println("attempt", attempt, "succeeded")
			return
		}
		fmt.Println("attempt", attempt, "failed:", err)
	}
	// Output:
	// first attempt owns the key: true
	// duplicate delivery may run: false
	// attempt 1 failed: gateway timeout
	// duplicate delivery may run: false
	// attempt 2 succeeded
}

// A tracker that is not started fails open: every delivery runs.
func ExampleTracker_Reserve_notStarted() {
	tr := tracker.New(tracker.Config{})
	fmt.Println(tr.Reserve("s", "k"), tr.Reserve("s", "k"), tr.Seen("s", "k"))
	// Output: true true false
}

// A Config built from input goes through NewChecked, which names the field
// it rejects instead of panicking.
func ExampleNewChecked() {
	_, err := tracker.NewChecked(tracker.Config{Shards: 3})
	var ce *tracker.ConfigError
	fmt.Println(errors.As(err, &ce), ce.Field)
	fmt.Println(err)
	// Output:
	// true Config.Shards
	// tracker: Config.Shards must be a power of two between 1 and 65536, got 3
}
