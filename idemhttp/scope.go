package idemhttp

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
)

// ScopeByAuthorization scopes keys by caller: the first 128 bits of the
// SHA-256 of the Authorization header, in hex; empty (one shared scope) for
// requests without one. A request with several Authorization lines is
// scoped by all of them, joined by newlines (which no header value holds),
// whichever of them the API reads. Two callers using the same key never
// see each other's records, and the credential itself is never stored.
//
// The scope is the credential, not the caller behind it: a retry sent
// with another token (refreshed since the first attempt) is in another
// scope and runs again, and requests authenticated by anything but the
// Authorization header (cookies, an API-key header) share the empty scope.
// Such APIs set Config.KeyScope to a function returning the authenticated
// caller's id, or use ScopeByHeader or ScopeByCookie.
func ScopeByAuthorization(r *http.Request) string {
	return scopeOf(r.Header["Authorization"])
}

// ScopeByHeader returns a KeyScope that scopes keys by the value of the
// header name (an API-key header such as X-Api-Key), as
// ScopeByAuthorization does by the Authorization header: a hash of its
// lines, never the value; empty (one shared scope) for requests without
// it.
func ScopeByHeader(name string) func(*http.Request) string {
	name = http.CanonicalHeaderKey(name)
	return func(r *http.Request) string { return scopeOf(r.Header[name]) }
}

// ScopeByCookie returns a KeyScope that scopes keys by the value of the
// cookie name (a session cookie), hashed as ScopeByAuthorization hashes
// its header; empty (one shared scope) for requests without it. Only that
// cookie counts: the others a browser sends come and go between a request
// and its retry, which would then run again in another scope.
func ScopeByCookie(name string) func(*http.Request) string {
	return func(r *http.Request) string {
		c, err := r.Cookie(name)
		if err != nil {
			return ""
		}
		return scopeOf([]string{c.Value})
	}
}

// scopeOf is the scope of a credential sent in lines: the first 128 bits
// of the SHA-256 of the lines joined by newlines, in hex; empty for none.
func scopeOf(lines []string) string {
	var sum [sha256.Size]byte
	switch {
	case len(lines) > 1:
		sum = sha256.Sum256([]byte(strings.Join(lines, "\n")))
	case len(lines) == 0 || lines[0] == "":
		return ""
	case len(lines[0]) <= 32:
		sum = sha256.Sum256([]byte(lines[0])) // the copy is on the stack
	default:
		sum = sum256Long(lines[0])
	}
	var buf [32]byte
	hex.Encode(buf[:], sum[:16])
	return string(buf[:])
}

// sum256Long is the SHA-256 of a string longer than 32 bytes, hashed from
// a copy on the stack when it is at most 1 KiB, as bearer tokens are,
// rather than on the heap. It is a function of its own so that short
// strings do not pay for its stack frame.
//
//go:noinline
func sum256Long(s string) [sha256.Size]byte {
	if len(s) > 1024 {
		return sha256.Sum256([]byte(s))
	}
	var buf [1024]byte
	return sha256.Sum256(buf[:copy(buf[:], s)])
}

// NoScope puts every caller in one scope. Use it only when the key space is
// already per caller.
func NoScope(*http.Request) string { return "" }
