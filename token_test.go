package idem_test

import (
	"sync"
	"testing"

	"github.com/idemgo/idem"
)

func TestNewTokenUnique(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				tok := idem.NewToken()
				mu.Lock()
				if seen[tok] || len(tok) != 40 {
					t.Errorf("token %q repeated or malformed", tok)
				}
				seen[tok] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}
