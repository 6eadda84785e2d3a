package idemgrpc

import (
	"context"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// metadataRecorder is the grpc.ServerTransportStream the handler of a
// protected call sees: it passes header and trailer metadata on to the
// real stream and keeps a copy of the names in allow (possibly none) that
// were accepted, for the record, and of the trailer
// grpc-status-details-bin, which can make the status a client reads. Once
// the client has gone (its context ended), the stream refuses metadata,
// but the handler goes on and its
// response is recorded for the client's retry: the metadata is then kept,
// and the refusal not reported, as idemhttp does with writes to a vanished
// client. Once the handler has returned (seal), metadata is refused with
// errHandlerReturned and reaches neither the stream nor the record, so that
// metadata set from a goroutine the handler left running is never sent
// without being recorded, or recorded without being sent. Metadata a
// client would refuse is refused too (sendable).
type metadataRecorder struct {
	grpc.ServerTransportStream
	allow  map[string]bool
	client context.Context // the call's own context

	// mu is held across each call to the stream and the copy kept of it,
	// so that seal falls between two of them, never inside one.
	mu      sync.Mutex
	sealed  bool
	header  metadata.MD
	trailer metadata.MD
}

// errHandlerReturned is what a handler's goroutine setting metadata after
// the handler returned is told.
var errHandlerReturned = status.Error(codes.Internal, "idemgrpc: metadata set after the handler returned is neither sent nor recorded")

func (r *metadataRecorder) SetHeader(md metadata.MD) error {
	return r.pass(r.ServerTransportStream.SetHeader, &r.header, md)
}

func (r *metadataRecorder) SendHeader(md metadata.MD) error {
	return r.pass(r.ServerTransportStream.SendHeader, &r.header, md)
}

func (r *metadataRecorder) SetTrailer(md metadata.MD) error {
	return r.pass(r.ServerTransportStream.SetTrailer, &r.trailer, md)
}

// pass hands md to the stream with send, and keeps it in dst if the stream
// accepted it or refused it because the client has gone; it returns what
// the handler is told.
func (r *metadataRecorder) pass(send func(metadata.MD) error, dst *metadata.MD, md metadata.MD) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sealed {
		return errHandlerReturned
	}
	if err := sendable(md); err != nil {
		return err
	}
	if err := send(md); err != nil && (r.client == nil || r.client.Err() == nil) {
		return err
	}
	for k, v := range md { // names in lower case, as sendable checked
		if !r.allow[k] && (dst != &r.trailer || k != statusDetailsMetadata) {
			continue
		}
		if *dst == nil {
			*dst = metadata.MD{}
		}
		(*dst)[k] = append((*dst)[k], v...)
	}
	return nil
}

// sendable returns an Internal error when md holds metadata that gRPC
// sends as it is but a gRPC client's HTTP/2 layer refuses, failing the
// call once the handler has done its work, so that the retry, answered
// from the record, would get another answer: a name that is empty or not
// a lower-case HTTP token (a metadata.MD literal can hold capitals), or a
// value of a name not ending in "-bin" with control characters other than
// tab. Names starting with ':', which gRPC does not send, are not checked.
// gRPC refuses such metadata to streaming handlers too, by a stricter rule.
func sendable(md metadata.MD) error {
	for k, vs := range md {
		if strings.HasPrefix(k, ":") {
			continue
		}
		if k == "" || strings.IndexFunc(k, func(c rune) bool {
			return !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", c))
		}) >= 0 {
			return status.Errorf(codes.Internal, "idemgrpc: metadata name %q is not a lower-case HTTP/2 field name: not sent", k)
		}
		if strings.HasSuffix(k, "-bin") {
			continue
		}
		for _, v := range vs {
			if strings.IndexFunc(v, func(c rune) bool { return c < ' ' && c != '\t' || c == 0x7f }) >= 0 {
				return status.Errorf(codes.Internal, "idemgrpc: value of metadata %q has control characters: not sent", k)
			}
		}
	}
	return nil
}

// seal ends the recording, as the handler has returned, and returns copies
// of the metadata kept.
func (r *metadataRecorder) seal() (header, trailer metadata.MD) {
	if r == nil {
		return nil, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sealed = true
	return r.header.Copy(), r.trailer.Copy()
}
