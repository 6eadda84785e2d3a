package idemhttp

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
)

// ScopeByAuthorization scopes keys by caller: the first 128 bits of the
// SHA-256 of the Authorization header, in hex; empty (one shared scope) for
// requests without one. Two callers using the same key never see each
// other's records, and the credential itself is never stored.
func ScopeByAuthorization(r *http.Request) string {
	auth := headerValue(r.Header, "Authorization")
	if auth == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(auth))
	var buf [32]byte
	hex.Encode(buf[:], sum[:16])
	return string(buf[:])
}

// NoScope puts every caller in one scope. Use it only when the key space is
// already per caller.
func NoScope(*http.Request) string { return "" }
