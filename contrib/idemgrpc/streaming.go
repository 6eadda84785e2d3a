package idemgrpc

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
)

// NewStream returns the stream server interceptor for cfg, the companion
// of New's for streaming methods (server, client and bidirectional
// streaming), or an error naming the Config field that is invalid. Pass
// it the same Config as New.
//
// A stream cannot be protected: its messages are not known when it starts
// and its outcome is not one answer that could be recorded. So that a
// client relying on its key learns that the key buys nothing, rather than
// having its stream run again on each retry, a streaming call of a method
// Config.Protect protects that carries the metadata idempotency-key (of
// any value, valid or not) or idempotency-key-bin fails with
// Unimplemented, reason ReasonKeyUnsupported, before its handler runs; a
// client that accepts running the stream unprotected calls again without
// the key. Every other stream, with no key or of an unprotected method,
// runs as it is: Config.RequireKey does not apply to streams, whose key
// could only be refused. Config.OnEvent is called for each refused stream
// (OutcomeKeyInvalid, Unimplemented) and for no other. The store is not
// used.
func NewStream(cfg Config) (grpc.StreamServerInterceptor, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	i := &interceptor{cfg: cfg}
	return i.interceptStream, nil
}

// StreamServerInterceptor is like NewStream but panics when cfg is
// invalid. Use it where cfg is fixed at compile time.
func StreamServerInterceptor(cfg Config) grpc.StreamServerInterceptor {
	i, err := NewStream(cfg)
	if err != nil {
		panic(err)
	}
	return i
}

func (i *interceptor) interceptStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if !i.cfg.Protect(info.FullMethod) {
		return handler(srv, ss)
	}
	md, _ := metadata.FromIncomingContext(ss.Context()) // names in lower case
	if len(md[KeyMetadata]) == 0 && len(md[KeyMetadata+"-bin"]) == 0 {
		return handler(srv, ss)
	}
	err := errKeyUnsupported()
	if i.cfg.OnEvent != nil {
		i.cfg.OnEvent(Event{FullMethod: info.FullMethod, Outcome: OutcomeKeyInvalid, Code: codes.Unimplemented})
	}
	return err
}
