package idemgrpc

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/idemgo/idem"
)

// recordedResponse is what Commit records: a JSON document holding either
// the response message in its wire form and its full type name, or the
// status of an error as a google.rpc.Status in its wire form, and the
// metadata to replay. []byte fields are base64 in JSON.
//
//	{"v":1,"code":0,"type":"pkg.Reply","body":"<base64>","header":{"x-id":["<base64>"]}}
//	{"v":1,"code":5,"status":"<base64>"}
type recordedResponse struct {
	V       int                 `json:"v"`
	Code    uint32              `json:"code"`
	Type    string              `json:"type,omitempty"`
	Body    []byte              `json:"body,omitempty"`
	Status  []byte              `json:"status,omitempty"`
	Header  map[string][][]byte `json:"header,omitempty"`
	Trailer map[string][][]byte `json:"trailer,omitempty"`
}

// encodeResponse builds the record of an outcome: resp when st is OK, else
// st as the client gets it (sentStatus). The error says why an outcome
// cannot be recorded: a response that is not a proto.Message, one that
// does not marshal (a *marshalError), one over max bytes, or a status
// code gRPC does not define (over 16), which decodeResponse would refuse.
func encodeResponse(resp any, st *status.Status, header, trailer metadata.MD, max int) ([]byte, error) {
	if st.Code() > codes.Unauthenticated {
		return nil, fmt.Errorf("idemgrpc: status code %d is not one gRPC defines", uint32(st.Code()))
	}
	rec := recordedResponse{V: 1, Code: uint32(st.Code()), Header: metadataBytes(header), Trailer: metadataBytes(trailer)}
	if st.Code() == codes.OK {
		// A nil pointer of a message type is a response: gRPC sends it as
		// the empty message, and so is it recorded. No message at all
		// (nil) is one too, but of no known type: the caller passes the
		// empty message of the method's response type instead, when it
		// can find that type.
		m := messageOf(resp)
		if m == nil {
			if resp == nil {
				return nil, errors.New("idemgrpc: the handler returned no response message, and the method's response type is unknown (set Config.NewResponse)")
			}
			return nil, fmt.Errorf("idemgrpc: response %T is not a proto.Message", resp)
		}
		b, err := proto.Marshal(m)
		if err != nil {
			return nil, &marshalError{err}
		}
		if len(b) > max {
			return nil, fmt.Errorf("idemgrpc: response is %d bytes, over MaxCapture (%d)", len(b), max)
		}
		rec.Type, rec.Body = string(m.ProtoReflect().Descriptor().FullName()), b
	} else {
		b, err := proto.Marshal(sentStatus(st).Proto())
		if err != nil {
			return nil, fmt.Errorf("idemgrpc: status does not marshal: %w", err)
		}
		if len(b) > max {
			return nil, fmt.Errorf("idemgrpc: status is %d bytes, over MaxCapture (%d)", len(b), max)
		}
		rec.Status = b
	}
	return json.Marshal(rec)
}

// sentStatus returns st as gRPC-go delivers it to the client, which is
// what a retry must get again: when its message is not valid UTF-8, each
// invalid byte becomes U+FFFD (grpc-message percent-encodes the message's
// runes, decoding every invalid byte as one), and the details are not
// sent, since the google.rpc.Status that would carry them does not marshal
// with such a message.
func sentStatus(st *status.Status) *status.Status {
	if utf8.ValidString(st.Message()) {
		return st
	}
	return status.New(st.Code(), string([]rune(st.Message())))
}

// messageOf returns v as a message, as gRPC's protobuf codec takes it: v
// itself, or for a message of the original API (github.com/golang/protobuf
// before 1.4, gogo/protobuf), which has no ProtoReflect method, its
// protoadapt.MessageV2Of view; nil for anything else.
func messageOf(v any) proto.Message {
	switch m := v.(type) {
	case proto.Message:
		return m
	case protoadapt.MessageV1:
		return protoadapt.MessageV2Of(m)
	}
	return nil
}

// nilIfEmpty is v, or nil when v is empty.
func nilIfEmpty[T ~[]byte | ~map[string][][]byte](v T) T {
	if len(v) == 0 {
		var none T
		return none
	}
	return v
}

// marshalError is the error of encodeResponse for a response that does
// not marshal.
type marshalError struct{ err error }

func (e *marshalError) Error() string { return "idemgrpc: response does not marshal: " + e.err.Error() }
func (e *marshalError) Unwrap() error { return e.err }

// sent is the status with which gRPC answers a response that does not
// marshal, as its protobuf codec reports it: Internal, with gRPC's message
// around the codec's error.
func (e *marshalError) sent() *status.Status {
	return status.New(codes.Internal, "grpc: error while marshaling: "+e.err.Error())
}

// decodeResponse reads a record written by encodeResponse. It accepts only
// records encodeResponse could have written, so that what it accepts can
// be replayed: a known code; for OK a message type and no status, for
// other codes a status of that code and no message; metadata with valid
// names. Empty fields come back nil, as encodeResponse leaves them out.
func decodeResponse(b []byte) (*recordedResponse, error) {
	var rec recordedResponse
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, fmt.Errorf("idemgrpc: recorded response does not decode: %w", err)
	}
	if rec.V != 1 {
		return nil, fmt.Errorf("idemgrpc: recorded response has version %d", rec.V)
	}
	rec.Body, rec.Status = nilIfEmpty(rec.Body), nilIfEmpty(rec.Status)
	rec.Header, rec.Trailer = nilIfEmpty(rec.Header), nilIfEmpty(rec.Trailer)
	switch c := codes.Code(rec.Code); {
	case c > codes.Unauthenticated:
		return nil, fmt.Errorf("idemgrpc: recorded response has unknown code %d", rec.Code)
	case c == codes.OK && (rec.Status != nil || !protoreflect.FullName(rec.Type).IsValid()):
		return nil, fmt.Errorf("idemgrpc: recorded response has type %q and %d bytes of status", rec.Type, len(rec.Status))
	case c != codes.OK && (rec.Body != nil || rec.Type != ""):
		return nil, fmt.Errorf("idemgrpc: recorded error (code %d) has a response message", rec.Code)
	case c != codes.OK:
		if _, err := rec.errorStatus(); err != nil {
			return nil, err
		}
	}
	for _, md := range []map[string][][]byte{rec.Header, rec.Trailer} {
		for k := range md {
			if !validMetadataName(k) {
				return nil, fmt.Errorf("idemgrpc: recorded metadata name %q is invalid", k)
			}
		}
	}
	return &rec, nil
}

// errorStatus rebuilds the status of a recorded error.
func (rec *recordedResponse) errorStatus() (*status.Status, error) {
	sp := status.New(codes.Unknown, "").Proto() // an empty google.rpc.Status to decode into
	if err := proto.Unmarshal(rec.Status, sp); err != nil {
		return nil, fmt.Errorf("idemgrpc: recorded status does not decode: %w", err)
	}
	st := status.FromProto(sp)
	if st.Code() == codes.OK || uint32(st.Code()) != rec.Code {
		return nil, fmt.Errorf("idemgrpc: recorded status has code %d, the record says %d", st.Code(), rec.Code)
	}
	return st, nil
}

// metadataBytes converts metadata to its recorded form.
func metadataBytes(md metadata.MD) map[string][][]byte {
	if len(md) == 0 {
		return nil
	}
	out := make(map[string][][]byte, len(md))
	for k, vs := range md {
		for _, v := range vs {
			out[k] = append(out[k], []byte(v))
		}
	}
	return out
}

// metadataOf converts recorded metadata back, keeping only the names in
// allow.
func metadataOf(m map[string][][]byte, allow map[string]bool) metadata.MD {
	md := metadata.MD{}
	for k, vs := range m {
		if !allow[k] {
			continue
		}
		for _, v := range vs {
			md[k] = append(md[k], string(v))
		}
	}
	return md
}

// requestFingerprint identifies a call by its method and its request
// message in deterministic wire form (known fields in a fixed order, map entries
// sorted, unknown fields as received, the messages in Anys of known types
// rewritten the same way: see canonicalAnys), so that equal messages give equal
// fingerprints within a build (see the package docs). The kind "GRPC"
// keeps them apart from HTTP requests' fingerprints.
func requestFingerprint(fullMethod string, req proto.Message) (idem.Fingerprint, []byte, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(canonicalAnys(req))
	if err != nil {
		return idem.Fingerprint{}, nil, fmt.Errorf("idemgrpc: request does not marshal: %w", err)
	}
	fp, err := idem.FingerprintRequest(idem.RequestParts{Method: "GRPC", Target: fullMethod, Body: b})
	return fp, b, err
}

// maxAnyDepth is how many google.protobuf.Any within one another
// canonicalAnys rewrites; deeper ones count as their bytes. Each level
// parses and marshals what it holds again: the bound keeps the work within
// a multiple of the request's size.
const maxAnyDepth = 16

// anyName is the full name of google.protobuf.Any.
const anyName protoreflect.FullName = "google.protobuf.Any"

// canonicalAnys returns m as it counts in a fingerprint: m itself, or when
// it holds a google.protobuf.Any (in any field, list or map, at any depth)
// whose type_url names a message type of protoregistry.GlobalTypes, a copy
// of m in which the value of each such Any is that message, as parsed,
// marshalled again deterministically, its own Anys first rewritten the
// same way. A packed message thus counts by its content, as the request's
// own fields do (not by the order of its map entries or fields on the
// wire), and not by how the client happened to marshal it. An Any of an
// unknown type, or whose value does not parse, counts as its bytes.
func canonicalAnys(m proto.Message) proto.Message {
	if r := m.ProtoReflect(); !mayHoldAny(r.Descriptor()) || !holdsAny(r) {
		return m
	}
	c := proto.Clone(m)
	rewriteAnys(c.ProtoReflect(), 0)
	return c
}

// mayHoldAny reports whether a message of type md can hold a
// google.protobuf.Any: it is one, or has a field (list or map value
// included) of a type that may, or extension ranges, whose fields its
// descriptor does not list. The answer is kept per type, so that a
// request whose type holds none, as most do, is not walked on each call.
func mayHoldAny(md protoreflect.MessageDescriptor) bool {
	if v, ok := anyHolders.Load(md.FullName()); ok {
		return v.(bool)
	}
	may := typeMayHoldAny(md, map[protoreflect.FullName]bool{})
	anyHolders.Store(md.FullName(), may)
	return may
}

// anyHolders is mayHoldAny's answer for each message type it was asked.
var anyHolders sync.Map // protoreflect.FullName → bool

// typeMayHoldAny is mayHoldAny, walking the types that md's fields reach
// but those in seen (a type met again adds nothing).
func typeMayHoldAny(md protoreflect.MessageDescriptor, seen map[protoreflect.FullName]bool) bool {
	if md.FullName() == anyName || md.ExtensionRanges().Len() > 0 {
		return true
	}
	seen[md.FullName()] = true
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fd.IsMap() {
			fd = fd.MapValue()
		}
		if m := fd.Message(); m != nil && !seen[m.FullName()] && typeMayHoldAny(m, seen) {
			return true
		}
	}
	return false
}

// holdsAny reports whether m is or holds a google.protobuf.Any.
func holdsAny(m protoreflect.Message) bool {
	if m.Descriptor().FullName() == anyName {
		return true
	}
	found := false
	eachMessage(m, func(m protoreflect.Message) { found = found || holdsAny(m) })
	return found
}

// eachMessage calls f with each message set in a field of m, list element
// and map value included.
func eachMessage(m protoreflect.Message, f func(protoreflect.Message)) {
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsMap():
			if fd.MapValue().Message() != nil {
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					f(mv.Message())
					return true
				})
			}
		case fd.Message() == nil:
		case fd.IsList():
			for i, l := 0, v.List(); i < l.Len(); i++ {
				f(l.Get(i).Message())
			}
		default:
			f(v.Message())
		}
		return true
	})
}

// rewriteAnys rewrites the values of the Anys in m, which is mutable, at
// depth depth of Anys within one another (see canonicalAnys).
func rewriteAnys(m protoreflect.Message, depth int) {
	if m.Descriptor().FullName() != anyName {
		eachMessage(m, func(m protoreflect.Message) { rewriteAnys(m, depth) })
		return
	}
	if depth >= maxAnyDepth {
		return
	}
	url, value := m.Descriptor().Fields().ByNumber(1), m.Descriptor().Fields().ByNumber(2)
	if url == nil || value == nil || url.Kind() != protoreflect.StringKind || value.Kind() != protoreflect.BytesKind {
		return
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByURL(m.Get(url).String())
	if err != nil {
		return
	}
	packed := mt.New()
	if proto.Unmarshal(m.Get(value).Bytes(), packed.Interface()) != nil {
		return
	}
	rewriteAnys(packed, depth+1)
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(packed.Interface())
	if err != nil {
		return
	}
	m.Set(value, protoreflect.ValueOfBytes(b))
}

// requestPayload is what Begin records about a call, for operators and
// Mismatch diagnosis: the method, the message type and its size, nothing
// of its content.
func requestPayload(fullMethod string, req proto.Message, size int) []byte {
	b, _ := json.Marshal(struct {
		Method    string `json:"method"`
		Message   string `json:"message"`
		BodyBytes int    `json:"body_bytes"`
	}{fullMethod, string(req.ProtoReflect().Descriptor().FullName()), size})
	return b
}
