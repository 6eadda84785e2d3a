package consumer_test

import (
	"testing"

	"github.com/idemgo/idem/consumer"
)

// TestMessageKeysAreExact: message keys are taken as they are, so keys
// that an Idempotency-Key header would read alike (quoted, padded) are
// different messages, and a key with commas, which a header could not
// carry, is an ordinary key.
func TestMessageKeysAreExact(t *testing.T) {
	for name, newLedger := range ledgers(t) {
		t.Run(name, func(t *testing.T) {
			b := setup(t, newLedger())
			ids := []string{"abc", `"abc"`, " abc", "abc ", "orders,3,1042", `a"b`, `"a\"b"`}
			for _, id := range ids {
				if o := handle(t, b, msg{ID: id}); o != consumer.Handled {
					t.Errorf("first delivery of %q: %s, want handled", id, o)
				}
			}
			for _, id := range ids {
				if o := handle(t, b, msg{ID: id}); o != consumer.Duplicate {
					t.Errorf("redelivery of %q: %s, want duplicate", id, o)
				}
			}
			if n := b.runs.Load(); int(n) != len(ids) {
				t.Errorf("handler ran %d times for %d messages", n, len(ids))
			}
		})
	}
}
