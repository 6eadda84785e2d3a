package pgstore_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
	"github.com/idemgo/idem/store/pgstore"
)

// A request that is small as sent can be huge as PostgreSQL prints it
// back: jsonb keeps 1e131071 as a numeric, and prints it with its 131072
// digits. Such a record could be written, but every Get of it, and every
// Begin of its key with another request (a Mismatch reads the recorded
// request back), failed as ErrUnavailable once the server had spent 1 GiB
// building the row. Its size is counted as printed, and it is refused
// before anything is sent; a request whose exponents print short, and
// one without any, pass as before.
func TestBeginRefusesRequestHugeAsRendered(t *testing.T) {
	tb := setup(t, pgstore.Config{})
	ctx := ctxT(t)
	ns := idemtest.RandomNamespace(t)

	// 80 KB as sent, within the default MaxPayload; 1.2 GB as printed.
	numbers := "[" + strings.Repeat("1e131071,", 8999) + "1e131071]"
	// The payload is recorded as given; its fingerprint is another's (a
	// canonical form refuses such numbers, a caller's may not).
	huge := idem.Request{Fingerprint: mustRequest(t, `{"n":1}`).Fingerprint, Payload: []byte(numbers)}
	k := mustKey(t, ns, "huge")
	_, err := tb.store.Begin(ctx, k, huge, nil)
	var tooLarge *idem.PayloadTooLargeError
	if !errors.As(err, &tooLarge) || !errors.Is(err, idem.ErrPayloadTooLarge) {
		if err == nil {
			_, getErr := tb.store.Get(ctx, k)
			_, beginErr := tb.store.Begin(ctx, k, mustRequest(t, `{}`), nil)
			t.Fatalf("Begin of a request of %d bytes, 1.2 GB as printed, accepted it; then Get = %v, and Begin with another request = %v", len(numbers), getErr, beginErr)
		}
		t.Fatalf("Begin of a request 1.2 GB as printed = %v, want a *PayloadTooLargeError", err)
	}
	if tooLarge.What != "request" || tooLarge.Size <= 1<<30 || tooLarge.Limit != idem.DefaultMaxPayload {
		t.Errorf("refusal = %+v, want What request, Size its printed size (over 1 GiB), Limit %d", tooLarge, idem.DefaultMaxPayload)
	}

	// An exponent that prints short counts as printed, and passes.
	ordinary := `{"amount":1.5e3,"ratio":2.5E-1,"id":"1e131071","note":"exempt"}`
	k = mustKey(t, ns, "ordinary")
	o, err := tb.store.Begin(ctx, k, mustRequest(t, ordinary), nil)
	if err != nil {
		t.Fatalf("Begin of an ordinary request: %v", err)
	}
	wantOutcome(t, o, idem.Fresh)
	rec, err := tb.store.Get(ctx, k)
	if err != nil {
		t.Fatalf("Get of an ordinary request: %v", err)
	}
	if !strings.Contains(string(rec.Request), `1500`) {
		t.Errorf("recorded request %s, want the amount as 1500", rec.Request)
	}

	// The limit is on the printed size: 1e100 is 5 bytes as sent and 101
	// as printed.
	small, err := pgstore.New(tb.pool, pgstore.Config{MaxPayload: 64})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := small.Begin(ctx, mustKey(t, ns, "small"), idem.Request{Fingerprint: huge.Fingerprint, Payload: []byte(`[1e100]`)}, nil); !errors.As(err, &tooLarge) || tooLarge.Size != 103 {
		t.Errorf("Begin of [1e100] (103 bytes as printed) under a limit of 64 = %v, want a *PayloadTooLargeError of Size 103", err)
	}
	exact := `[` + strings.Repeat(`1,`, 30) + `1]` // 63 bytes, no exponent
	if _, err := small.Begin(ctx, mustKey(t, ns, "exact"), mustRequest(t, exact), nil); err != nil {
		t.Errorf("Begin of a request of 63 bytes without exponent under a limit of 64 = %v", err)
	}
}
