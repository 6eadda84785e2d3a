package idemgrpc_test

import (
	"testing"

	"github.com/idemgo/idem/contrib/idemgrpc"
	"github.com/idemgo/idem/store/memstore"
)

// A response under Config.MaxCapture whose record (the message in base64,
// with its type and metadata) is over the store's MaxPayload cannot be
// committed: it is delivered, the key is released rather than left in
// progress, and the retry runs the handler again.
func TestRecordOverTheStoresMaxPayload(t *testing.T) {
	s, err := memstore.New(memstore.Config{MaxPayload: 1024})
	if err != nil {
		t.Fatal(err)
	}
	b := setup(t, idemgrpc.Config{Store: s})
	b.svc.pad = 900 // under MaxCapture (1 MiB), over 1024 bytes once in base64
	for range 2 {
		r := b.call(chargeMethod, amount(1), key("big")...)
		wantOK(t, r)
		if r.replayed() || len(r.reply) < 900 {
			t.Fatalf("reply of %d bytes, replayed %v; want the handler's, not replayed", len(r.reply), r.replayed())
		}
		if e := <-b.events; e.Outcome != idemgrpc.OutcomeReleased || e.Err == nil {
			t.Errorf("event %+v, want released with the store's error", e)
		}
	}
	wantRuns(t, b, 2)
}
