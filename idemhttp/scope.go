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
// caller's id.
func ScopeByAuthorization(r *http.Request) string {
	lines := r.Header["Authorization"]
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
