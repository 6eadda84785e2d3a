package idemgrpc

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"google.golang.org/grpc/metadata"
)

// ScopeByAuthorization scopes keys by caller: the first 128 bits of the
// SHA-256 of the "authorization" value of the incoming metadata, in hex;
// empty (one shared scope) for calls without one. Several values count
// together, joined by newlines. It is the scope
// idemhttp.ScopeByAuthorization gives the same credentials over HTTP. Two
// callers using the same key never see each other's records, and the
// credential itself is never stored.
//
// The scope is the credential, not the caller behind it: a retry sent with
// another token (per-RPC credentials that refreshed theirs since the first
// attempt) is in another scope and runs again, and calls authenticated by
// anything but the "authorization" metadata (mutual TLS, an API-key
// metadata) share the empty scope. Such services set Config.KeyScope to a
// function returning the authenticated caller's id, from the peer's
// certificate (peer.FromContext) or from what their authentication
// interceptor, placed before this one, put in the context.
func ScopeByAuthorization(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	return authorizationScope(md)
}

// authorizationScope is ScopeByAuthorization's scope for the incoming
// metadata md.
func authorizationScope(md metadata.MD) string {
	auth := strings.Join(md.Get("authorization"), "\n")
	if auth == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(auth))
	return hex.EncodeToString(sum[:16])
}

// NoScope puts every caller in one scope. Use it only when the key space is
// already per caller.
func NoScope(context.Context) string { return "" }
