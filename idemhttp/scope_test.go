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

// TestScopeByAuthorizationSeveralLines checks that every Authorization
// line counts: requests that differ only after the first line, or only in
// the order of their lines, are in different scopes, and an empty first
// line does not put a credential in the shared scope.
func TestScopeByAuthorizationSeveralLines(t *testing.T) {
	scope := func(lines ...string) string {
		r := httptest.NewRequest("POST", "/", nil)
		for _, l := range lines {
			r.Header.Add("Authorization", l)
		}
		return ScopeByAuthorization(r)
	}
	scopes := map[string][]string{}
	for _, lines := range [][]string{{"Bearer a"}, {"Bearer a", "Bearer b"}, {"Bearer a", "Bearer c"}, {"Bearer b", "Bearer a"}, {"", "Bearer a"}} {
		s := scope(lines...)
		if s == "" {
			t.Errorf("%q: shared scope", lines)
		}
		if other, ok := scopes[s]; ok {
			t.Errorf("%q and %q share scope %s", lines, other, s)
		}
		scopes[s] = lines
	}
	sum := sha256.Sum256([]byte("Bearer a\nBearer b"))
	if got, want := scope("Bearer a", "Bearer b"), hex.EncodeToString(sum[:16]); got != want {
		t.Errorf("two lines: scope %s, want %s", got, want)
	}
}
