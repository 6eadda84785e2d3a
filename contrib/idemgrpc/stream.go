package idemgrpc

import (
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// metadataRecorder is the grpc.ServerTransportStream the handler of a
// protected call sees: it passes header and trailer metadata on to the
// real stream and keeps a copy of the names in allow that were accepted,
// for the record.
type metadataRecorder struct {
	grpc.ServerTransportStream
	allow map[string]bool

	mu      sync.Mutex
	header  metadata.MD
	trailer metadata.MD
}

func (r *metadataRecorder) SetHeader(md metadata.MD) error {
	err := r.ServerTransportStream.SetHeader(md)
	if err == nil {
		r.keep(&r.header, md)
	}
	return err
}

func (r *metadataRecorder) SendHeader(md metadata.MD) error {
	err := r.ServerTransportStream.SendHeader(md)
	if err == nil {
		r.keep(&r.header, md)
	}
	return err
}

func (r *metadataRecorder) SetTrailer(md metadata.MD) error {
	err := r.ServerTransportStream.SetTrailer(md)
	if err == nil {
		r.keep(&r.trailer, md)
	}
	return err
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
