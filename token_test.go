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

func TestAppendTokenAppendsANewToken(t *testing.T) {
	a := idem.NewToken()
	b := idem.AppendToken([]byte("prefix:"))
	if string(b[:7]) != "prefix:" || len(b) != 7+idem.TokenLen {
		t.Fatalf("AppendToken = %q, want prefix: and %d characters", b, idem.TokenLen)
	}
	tok := string(b[7:])
	if tok == a || tok[:24] != a[:24] {
		t.Errorf("tokens %q then %q: want the process prefix and a new counter", a, tok)
	}
	for _, c := range tok {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			t.Fatalf("token %q is not lower-case hex", tok)
		}
	}
}
