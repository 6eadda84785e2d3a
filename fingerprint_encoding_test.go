package idem

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"testing"
)

// referenceFingerprint hashes the fingerprint encoding written out field by
// field, as the encoding is specified.
func referenceFingerprint(kind, method, target string, body []byte) string {
	var enc []byte
	for _, s := range []string{"idem/fingerprint/v1", kind, method, target} {
		enc = binary.BigEndian.AppendUint64(enc, uint64(len(s)))
		enc = append(enc, s...)
	}
	enc = binary.BigEndian.AppendUint64(enc, uint64(len(body)))
	enc = append(enc, body...)
	d := sha256.Sum256(enc)
	return string(append([]byte{fingerprintV1}, d[:]...))
}

// TestFingerprintBodySizes checks the one-call hash of small bodies and the
// streamed hash of large ones against the encoding, on both sides of the
// size where fingerprint switches between them.
func TestFingerprintBodySizes(t *testing.T) {
	for _, n := range []int{0, 1, 55, 56, 64, 1000, inlineBody - 1, inlineBody, inlineBody + 1, 70 << 10} {
		body := bytes.Repeat([]byte{'x'}, n)
		got, err := FingerprintRequest(RequestParts{Method: "post", Target: "/t?q=1", Body: body})
		if err != nil {
			t.Fatal(err)
		}
		if want := referenceFingerprint("request/raw", "POST", "/t?q=1", body); string(got.b[:]) != want {
			t.Errorf("raw body of %d bytes: fingerprint %x, want %x", n, got.b, want)
		}
		doc := append(append([]byte(`"`), body...), '"')
		got, err = FingerprintRequest(RequestParts{Method: "PUT", Target: "/j", Body: doc, JSON: true})
		if err != nil {
			t.Fatal(err)
		}
		if want := referenceFingerprint("request/json", "PUT", "/j", doc); string(got.b[:]) != want {
			t.Errorf("JSON body of %d bytes: fingerprint %x, want %x", len(doc), got.b, want)
		}
	}
}
