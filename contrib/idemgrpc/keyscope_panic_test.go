package idemgrpc_test

import (
	"context"
	"strings"
	"testing"

	"github.com/idemgo/idem/contrib/idemgrpc"
	"google.golang.org/grpc/codes"
)

// A Config.KeyScope that panics goes on panicking (for a recovering
// interceptor outside to handle), and the event says what happened: an
// internal error, the Internal code a recovering interceptor answers, and
// the panic.
func TestKeyScopePanicIsInternal(t *testing.T) {
	b := setup(t, idemgrpc.Config{KeyScope: func(context.Context) string { panic("scope boom") }})
	r := b.call(chargeMethod, amount(1), key("scope")...)
	if r.err == nil {
		t.Fatal("the call succeeded")
	}
	e := <-b.events
	if e.Outcome != idemgrpc.OutcomeInternal || e.Code != codes.Internal {
		t.Errorf("event outcome %q code %v, want %q Internal", e.Outcome, e.Code, idemgrpc.OutcomeInternal)
	}
	if e.Err == nil || !strings.Contains(e.Err.Error(), "Config.KeyScope") || !strings.Contains(e.Err.Error(), "scope boom") {
		t.Errorf("event error %v, want it to name Config.KeyScope and the panic", e.Err)
	}
	if n := b.svc.runs.Load(); n != 0 {
		t.Errorf("the handler ran %d times", n)
	}
}
