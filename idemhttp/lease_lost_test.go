package idemhttp_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/store/memstore"
)

// The handler's context, detached from the client's, ends with cause
// idem.ErrLeaseLost when the key's reservation is lost under it, as the
// package doc says.
func TestHandlerContextEndsWhenTheLeaseIsLost(t *testing.T) {
	s, _ := memstore.New(memstore.Config{})
	cause := make(chan error, 1)
	mw := idemhttp.Middleware(idemhttp.Config{Store: staleHeartbeats{s}, Lease: 60 * time.Millisecond})
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
			cause <- context.Cause(r.Context())
		case <-time.After(10 * time.Second):
			cause <- errors.New("the context did not end")
		}
		w.WriteHeader(http.StatusCreated)
	}))
	req := httptest.NewRequest(http.MethodPost, "/x", strings.NewReader(`{}`))
	req.Header.Set("Idempotency-Key", "lost-1")
	h.ServeHTTP(httptest.NewRecorder(), req)
	if err := <-cause; !errors.Is(err, idem.ErrLeaseLost) {
		t.Errorf("the handler's context ended with %v, want idem.ErrLeaseLost", err)
	}
}
