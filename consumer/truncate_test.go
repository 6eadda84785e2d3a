package consumer_test

import (
	"context"
	"strings"
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/consumer"
	"github.com/idemgo/idem/store/memstore"
)

// TestKeyInErrorIsCutAtARuneBoundary: a message key too long to quote in
// full is cut at a rune boundary in Handle's error, never in the middle of
// a multi-byte character, which %q would print as escaped bytes (\xc3…) the
// key never held, making a valid UTF-8 key read as an invalid one.
func TestKeyInErrorIsCutAtARuneBoundary(t *testing.T) {
	s, err := memstore.New(memstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := consumer.New(consumer.Config[msg]{
		Ledger: consumer.StoreLedger(s, idem.MustNamespace("orders"), nil),
		Key:    func(m msg) (string, error) { return m.ID, nil },
		Handle: func(context.Context, msg) error { return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	// 401 bytes, too long for a key; the 40th byte starts a "é".
	key := "a" + strings.Repeat("é", 200)
	out, err := c.Handle(context.Background(), msg{ID: key})
	if out != consumer.Failed || err == nil {
		t.Fatalf("Handle of a key of %d bytes = %s, %v; want Failed with an error", len(key), out, err)
	}
	if text := err.Error(); strings.Contains(text, `\x`) || !strings.Contains(text, `"a`+strings.Repeat("é", 19)+`…"`) {
		t.Errorf("Handle's error = %q; want the key cut before its 20th \"é\", with no escaped bytes", text)
	}
}
