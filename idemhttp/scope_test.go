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

// ScopeByHeader scopes by the named header (any spelling of its name) as
// ScopeByAuthorization does by Authorization, and ScopeByCookie by the
// named cookie's value alone, whatever other cookies come with it; both
// give the shared empty scope to a request without it.
func TestScopeByHeaderAndCookie(t *testing.T) {
	hash := func(v string) string { sum := sha256.Sum256([]byte(v)); return hex.EncodeToString(sum[:16]) }
	byKey := ScopeByHeader("x-api-key")
	bySession := ScopeByCookie("session")
	r := httptest.NewRequest("POST", "/", nil)
	if byKey(r) != "" || bySession(r) != "" {
		t.Fatalf("no header, no cookie: scopes %q, %q; want both empty", byKey(r), bySession(r))
	}
	r.Header.Set("X-Api-Key", "key-1")
	r.Header.Set("Authorization", "Bearer other")
	r.Header.Set("Cookie", "theme=dark; session=s-1; _ga=123")
	if got, want := byKey(r), hash("key-1"); got != want {
		t.Errorf("ScopeByHeader = %q, want %q (the hash of X-Api-Key alone)", got, want)
	}
	if got, want := bySession(r), hash("s-1"); got != want {
		t.Errorf("ScopeByCookie = %q, want %q (the hash of the session cookie alone)", got, want)
	}
	r.Header.Set("Cookie", "_ga=456; session=s-1")
	if got, want := bySession(r), hash("s-1"); got != want {
		t.Errorf("ScopeByCookie with other cookies changed = %q, want %q", got, want)
	}
	r.Header.Set("X-Api-Key", "key-2")
	r.Header.Set("Cookie", "session=s-2")
	if byKey(r) == hash("key-1") || bySession(r) == hash("s-1") {
		t.Errorf("another key or session gave the first one's scope")
	}
}
