package idemgrpc

import (
	"context"
	"net/http/httptest"
	"testing"

	"google.golang.org/grpc/metadata"

	"github.com/idemgo/idem/idemhttp"
)

// TestScopeMatchesHTTP checks that a credential, or several, gets the same
// scope over gRPC as over HTTP, and none gets the shared scope.
func TestScopeMatchesHTTP(t *testing.T) {
	for _, lines := range [][]string{{"Bearer a"}, {"Bearer a", "Bearer b"}, {"", "Bearer a"}} {
		md := metadata.MD{}
		r := httptest.NewRequest("POST", "/", nil)
		for _, l := range lines {
			md.Append("authorization", l)
			r.Header.Add("Authorization", l)
		}
		got, want := ScopeByAuthorization(metadata.NewIncomingContext(context.Background(), md)), idemhttp.ScopeByAuthorization(r)
		if got != want || got == "" {
			t.Errorf("%q: gRPC scope %q, HTTP scope %q", lines, got, want)
		}
	}
	if got := ScopeByAuthorization(context.Background()); got != "" {
		t.Errorf("no credential: scope %q, want none", got)
	}
}
