package idemhttp_test

import (
	"context"
	"testing"
	"time"

	"github.com/idemgo/idem/idemhttp"
)

// records counts the records of the middleware's namespace in b's store,
// by purging as of a time past every retention: the count PurgeExpired
// returns is every record there was. It empties the store.
func (b *bundle) records(t *testing.T) int {
	t.Helper()
	n, err := b.store.PurgeExpired(context.Background(), idemhttp.DefaultNamespace, b.clock.Now().Add(100*365*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// H2 (no record) and H5 (one record), counted in the store: a keyless
// request passed through leaves nothing behind, and ten retries of one
// key leave exactly one record.
func TestH2H5RecordsCounted(t *testing.T) {
	b := setup(t, idemhttp.Config{})
	for range 3 {
		if w := b.do(t, "POST", "/charges", `{"a":1}`); w.Code != 201 {
			t.Fatalf("keyless POST: %d", w.Code)
		}
	}
	if n := b.records(t); n != 0 {
		t.Fatalf("%d records after keyless requests, want 0", n)
	}
	for range 10 {
		if w := b.do(t, "POST", "/charges", `{"a":1}`, key("order-1")); w.Code != 201 {
			t.Fatalf("POST: %d", w.Code)
		}
	}
	wantRuns(t, b, 4)
	if n := b.records(t); n != 1 {
		t.Fatalf("%d records after ten retries of one key, want 1", n)
	}
}
