package idemgrpc_test

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/idemgo/idem/contrib/idemgrpc"
)

// A status code beyond those gRPC defines (0–16), which a handler may
// return and gRPC sends as it is, is never recorded, whatever
// Config.StoreCode says: the retry runs again and gets the handler's code,
// not an Internal error for a record no replay can read.
func TestH12UnknownCodeIsNotRecorded(t *testing.T) {
	b := setup(t, idemgrpc.Config{StoreCode: func(codes.Code) bool { return true }})
	b.svc.err = status.Error(codes.Code(99), "odd")
	for i := range 2 {
		r := b.call(chargeMethod, amount(1), key("odd")...)
		if r.code() != codes.Code(99) || r.replayed() {
			t.Fatalf("call %d: %v replayed %v, want code 99 from the handler", i, r.err, r.replayed())
		}
		if e := <-b.events; e.Outcome != idemgrpc.OutcomeReleased || e.Code != codes.Code(99) || e.Err == nil {
			t.Errorf("call %d: event %+v, want released, code 99, with why", i, e)
		}
	}
	wantRuns(t, b, 2)
}
