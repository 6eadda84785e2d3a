package idemgrpc

import (
	"encoding/json"
	"reflect"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// FuzzDecodeResponse checks that whatever record decodeResponse accepts
// can be replayed and round-trips: written again as encodeResponse writes
// records, it decodes to the same record; an error record's status
// rebuilds with the recorded code and encodes back to the same record.
func FuzzDecodeResponse(f *testing.F) {
	ok, _ := encodeResponse(wrapperspb.String("charge 1"), status.New(codes.OK, ""),
		metadata.Pairs("x-id", "1", "x-trace-bin", "\x00\xff"), metadata.Pairs("x-t", "2"), DefaultMaxCapture)
	st, _ := status.New(codes.NotFound, "no such order").WithDetails(wrapperspb.String("d"))
	notFound, _ := encodeResponse(nil, st, nil, nil, DefaultMaxCapture)
	empty, _ := encodeResponse((*wrapperspb.StringValue)(nil), status.New(codes.OK, ""), nil, nil, DefaultMaxCapture)
	badST, _ := status.New(codes.NotFound, "no \xff order").WithDetails(wrapperspb.String("d"))
	badUTF8, _ := encodeResponse(nil, badST, nil, nil, DefaultMaxCapture)
	for _, seed := range [][]byte{ok, notFound, empty, badUTF8,
		[]byte(`{"v":1,"code":0,"type":"pkg.Reply"}`),
		[]byte(`{"v":1,"code":5,"status":""}`),
		[]byte(`{"v":1,"code":0,"type":"a.B","body":"","header":{}}`),
		[]byte(`{"v":1,"code":0,"type":"a.B","header":{"X-Id":["MQ=="]}}`),
		[]byte(`{"v":1,"code":99,"status":"CGM="}`),
		[]byte(`{"v":1,"code":0,"type":"a.B","status":"CAU="}`),
		[]byte(`{"v":1,"V":2,"code":0,"type":"a.B"}`),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := decodeResponse(b)
		if err != nil {
			return
		}
		again, err := json.Marshal(rec)
		if err != nil {
			t.Fatalf("an accepted record does not encode: %v", err)
		}
		rec2, err := decodeResponse(again)
		if err != nil {
			t.Fatalf("re-encoded record %s rejected: %v", again, err)
		}
		if !reflect.DeepEqual(rec, rec2) {
			t.Fatalf("record %+v re-encoded as %s decodes as %+v", rec, again, rec2)
		}
		header, trailer := metadataOf(rec.Header, allNames(rec.Header)), metadataOf(rec.Trailer, allNames(rec.Trailer))
		if codes.Code(rec.Code) == codes.OK {
			if rec.Status != nil || rec.Type == "" {
				t.Fatalf("accepted response record %+v has a status or no type", rec)
			}
			return
		}
		if rec.Body != nil || rec.Type != "" {
			t.Fatalf("accepted error record %+v has a response", rec)
		}
		st, err := rec.errorStatus()
		if err != nil {
			t.Fatalf("accepted error record %+v cannot be replayed: %v", rec, err)
		}
		enc, err := encodeResponse(nil, st, header, trailer, len(rec.Status)+1<<10)
		if err != nil {
			t.Fatalf("status of %+v does not encode: %v", rec, err)
		}
		rec3, err := decodeResponse(enc)
		if err != nil {
			t.Fatalf("re-encoded error record %s rejected: %v", enc, err)
		}
		st3, err := rec3.errorStatus()
		if err != nil || !proto.Equal(st.Proto(), st3.Proto()) || !reflect.DeepEqual(rec.Header, rec3.Header) || !reflect.DeepEqual(rec.Trailer, rec3.Trailer) {
			t.Fatalf("error record %+v re-encoded as %+v (%v)", rec, rec3, err)
		}
	})
}

func allNames(m map[string][][]byte) map[string]bool {
	names := map[string]bool{}
	for k := range m {
		names[k] = true
	}
	return names
}
