package idemgrpc

import (
	"context"
	"crypto/sha256"
	"encoding/hex"

	"google.golang.org/grpc/metadata"
)

// ScopeByAuthorization scopes keys by caller: the first 128 bits of the
// SHA-256 of the first "authorization" value of the incoming metadata, in
// hex; empty (one shared scope) for calls without one. It is the scope
// idemhttp.ScopeByAuthorization gives the same credential over HTTP. Two
// callers using the same key never see each other's records, and the
// credential itself is never stored.
func ScopeByAuthorization(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	auth := md.Get("authorization")
	if len(auth) == 0 || auth[0] == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(auth[0]))
	return hex.EncodeToString(sum[:16])
}

// NoScope puts every caller in one scope. Use it only when the key space is
// already per caller.
func NoScope(context.Context) string { return "" }
