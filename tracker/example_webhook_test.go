package tracker_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/idemgo/idem/tracker"
)

// A webhook endpoint guards its handler with a Tracker: the provider
// retries a delivery it got no answer for, sometimes while the first is
// still running. A duplicate of handled work is acknowledged without
// running; a duplicate of work still running gets 409 Conflict with a
// Retry-After, so that the provider tries again later (and the work runs
// again if the first attempt fails); a failed delivery releases its key so
// that the retry runs.
func Example_webhook() {
	tr := tracker.New(tracker.Config{TTL: 10 * time.Minute})
	tr.Start()
	defer tr.Stop()

	var (
		running  = make(chan struct{}) // the first evt_1 is in process
		proceed  = make(chan struct{}) // and may finish
		attempts = map[string]int{}    // process's runs per event
		mu       sync.Mutex
	)
	process := func(id string) error {
		mu.Lock()
		attempts[id]++
		n := attempts[id]
		mu.Unlock()
		switch {
		case id == "evt_1" && n == 1:
			close(running)
			<-proceed
		case id == "evt_2" && n == 1:
			return errors.New("database unavailable")
		}
		return nil
	}

	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("Webhook-Id")
		if !tr.Reserve("webhooks", id) {
			if tr.Completed("webhooks", id) {
				fmt.Fprint(w, "duplicate, acknowledged")
				return
			}
			left, _ := tr.Reserved("webhooks", id)
			w.Header().Set("Retry-After", fmt.Sprint(int(left.Seconds())+1))
			http.Error(w, "in progress", http.StatusConflict)
			return
		}
		if err := process(id); err != nil {
			tr.Release("webhooks", id) // the provider's retry runs it again
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		tr.Complete("webhooks", id)
		fmt.Fprint(w, "processed")
	})

	deliver := func(id string) {
		req := httptest.NewRequest(http.MethodPost, "/webhooks", nil)
		req.Header.Set("Webhook-Id", id)
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		fmt.Printf("%s: %d %s\n", id, rec.Code, strings.TrimSpace(rec.Body.String()))
	}

	var first sync.WaitGroup
	first.Go(func() { deliver("evt_1") })
	<-running
	deliver("evt_1") // a retry while the first is running
	close(proceed)
	first.Wait()
	deliver("evt_1") // a retry after it was processed
	deliver("evt_2") // fails
	deliver("evt_2") // the retry runs it again
	// Output:
	// evt_1: 409 in progress
	// evt_1: 200 processed
	// evt_1: 200 duplicate, acknowledged
	// evt_2: 500 database unavailable
	// evt_2: 200 processed
}

// Tests control the tracker's time with Config.Now, so that a TTL can pass
// without waiting. Here a worker reserves a job and dies: the reservation
// turns duplicates away until the TTL passes, and then the job is free
// again.
func ExampleConfig() {
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { // called from the sweeper too: lock it
		mu.Lock()
		defer mu.Unlock()
		return now
	}
	advance := func(d time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(d)
	}

	tr := tracker.New(tracker.Config{TTL: time.Minute, Now: clock})
	tr.Start()
	defer tr.Stop()

	fmt.Println("worker 1 reserves:", tr.Reserve("jobs", "job-7")) // and dies
	left, _ := tr.Reserved("jobs", "job-7")
	fmt.Println("worker 2 reserves:", tr.Reserve("jobs", "job-7"), "; reserved for", left)
	advance(time.Minute)
	fmt.Println("after the TTL, worker 2 reserves:", tr.Reserve("jobs", "job-7"))
	// Output:
	// worker 1 reserves: true
	// worker 2 reserves: false ; reserved for 1m0s
	// after the TTL, worker 2 reserves: true
}
