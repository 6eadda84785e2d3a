package tracker

import (
	"strconv"
	"sync"
	"testing"
)

// Stop racing writers leaves nothing behind: a write that found the
// Tracker started but reached its shard after Stop emptied it must not
// store its key there, where it would survive a later Start and block
// that key's next delivery.
func TestStopRacingWritersLeavesNothing(t *testing.T) {
	writes := map[string]func(tr *Tracker, k string) (more bool){
		"Acquire": func(tr *Tracker, k string) bool { tok, _ := tr.Acquire("s", k); return !tok.IsZero() },
		"ReserveOwned": func(tr *Tracker, k string) bool {
			// A token of tr that owns none of these keys, so every call
			// takes a free key (one of another Tracker would change nothing).
			return tr.ReserveOwned("s", k, Token{tracker: tr.id, n: 1}) && tr.started()
		},
		"CompleteOwned": func(tr *Tracker, k string) bool { return tr.CompleteOwned("s", k, Token{}) },
		"Complete":      func(tr *Tracker, k string) bool { tr.Complete("s", k); return tr.started() },
	}
	for name, write := range writes {
		t.Run(name, func(t *testing.T) {
			for iter := range 2000 {
				tr := New(Config{Shards: 1})
				tr.Start()
				var wg sync.WaitGroup
				started := make(chan struct{}, 2)
				for g := range 2 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := 0; ; i++ {
							more := write(tr, strconv.Itoa(g)+"-"+strconv.Itoa(i))
							if i == 0 {
								started <- struct{}{}
							}
							if !more {
								return
							}
						}
					}()
				}
				<-started
				<-started
				tr.Stop()
				wg.Wait()
				if n := tr.Len(); n != 0 {
					t.Fatalf("iteration %d: %d keys left in the stopped Tracker", iter, n)
				}
			}
		})
	}
}
