package idemhttp

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestScopeByAuthorizationLengths checks the scope against the SHA-256 of
// the header for credentials on both sides of the lengths where the hash
// is taken from a stack copy.
func TestScopeByAuthorizationLengths(t *testing.T) {
	for _, n := range []int{1, 32, 33, 900, 1024, 1025, 5000} {
		auth := strings.Repeat("k", n-1) + "z"
		r := httptest.NewRequest("POST", "/", nil)
		r.Header.Set("Authorization", auth)
		sum := sha256.Sum256([]byte(auth))
		if got, want := ScopeByAuthorization(r), hex.EncodeToString(sum[:16]); got != want {
			t.Errorf("credential of %d bytes: scope %s, want %s", n, got, want)
		}
	}
	if got := ScopeByAuthorization(httptest.NewRequest("POST", "/", nil)); got != "" {
		t.Errorf("no credential: scope %q, want none", got)
	}
}
