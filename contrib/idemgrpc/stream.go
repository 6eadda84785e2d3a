package idemgrpc

import (
	"context"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// metadataRecorder is the grpc.ServerTransportStream the handler of a
// protected call sees: it passes header and trailer metadata on to the
// real stream and keeps a copy of the names in allow (possibly none) that
// were accepted, for the record. Once the client has gone (its context ended), the
// stream refuses metadata, but the handler goes on and its response is
// recorded for the client's retry: the metadata is then kept, and the
// refusal not reported, as idemhttp does with writes to a vanished client.
type metadataRecorder struct {
	grpc.ServerTransportStream
	allow  map[string]bool
	client context.Context // the call's own context

	mu      sync.Mutex
	header  metadata.MD
	trailer metadata.MD
}

func (r *metadataRecorder) SetHeader(md metadata.MD) error {
	return r.accepted(r.ServerTransportStream.SetHeader(md), &r.header, md)
}

func (r *metadataRecorder) SendHeader(md metadata.MD) error {
	return r.accepted(r.ServerTransportStream.SendHeader(md), &r.header, md)
}

func (r *metadataRecorder) SetTrailer(md metadata.MD) error {
	return r.accepted(r.ServerTransportStream.SetTrailer(md), &r.trailer, md)
}

// accepted keeps md in dst if the stream accepted it (err is nil) or
// refused it because the client has gone, and returns what the handler is
// told.
func (r *metadataRecorder) accepted(err error, dst *metadata.MD, md metadata.MD) error {
	if err != nil && (r.client == nil || r.client.Err() == nil) {
		return err
	}
	r.keep(dst, md)
	return nil
}

func (r *metadataRecorder) keep(dst *metadata.MD, md metadata.MD) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, v := range md {
		k = strings.ToLower(k)
		if !r.allow[k] {
			continue
		}
		if *dst == nil {
			*dst = metadata.MD{}
		}
		(*dst)[k] = append((*dst)[k], v...)
	}
}

// recorded returns copies of the metadata kept so far.
func (r *metadataRecorder) recorded() (header, trailer metadata.MD) {
	if r == nil {
		return nil, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.header.Copy(), r.trailer.Copy()
}
