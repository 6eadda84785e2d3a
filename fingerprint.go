package idem

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"strings"
	"sync"

	"github.com/idemgo/idem/internal/canonjson"
)

// fingerprintV1 is the version byte of the only encoding so far.
const fingerprintV1 = 1

// Fingerprint identifies a request: a version byte followed by a SHA-256
// digest of a versioned, length-prefixed encoding of what identifies the
// request. Fingerprints are comparable with ==; the zero Fingerprint is
// invalid. Stores keep Bytes() and rebuild it with ParseFingerprint.
type Fingerprint struct {
	b string
}

// ParseFingerprint rebuilds a fingerprint from its Bytes.
func ParseFingerprint(b []byte) (Fingerprint, error) {
	if len(b) != 1+sha256.Size || b[0] != fingerprintV1 {
		return Fingerprint{}, fmt.Errorf("%w: %d bytes, version %d", ErrInvalidFingerprint, len(b), firstByte(b))
	}
	return Fingerprint{b: string(b)}, nil
}

func firstByte(b []byte) int {
	if len(b) == 0 {
		return -1
	}
	return int(b[0])
}

// Bytes returns the binary form: version byte, then digest.
func (f Fingerprint) Bytes() []byte { return []byte(f.b) }

// IsZero reports whether f is the zero Fingerprint.
func (f Fingerprint) IsZero() bool { return f.b == "" }

// String returns "v1:" followed by the hex digest.
func (f Fingerprint) String() string {
	if f.b == "" {
		return "v0:"
	}
	return fmt.Sprintf("v%d:%s", f.b[0], hex.EncodeToString([]byte(f.b[1:])))
}

// FingerprintJSON fingerprints a JSON document by its canonical form, so
// documents that differ only in member order, whitespace or escapes get the
// same fingerprint. Errors are those of CanonicalJSON.
func FingerprintJSON(doc []byte, lim *CanonicalLimits) (Fingerprint, error) {
	c, err := CanonicalJSON(doc, lim)
	if err != nil {
		return Fingerprint{}, err
	}
	return fingerprint("json", "", "", c), nil
}

// FingerprintBytes fingerprints opaque bytes as they are.
func FingerprintBytes(b []byte) Fingerprint {
	return fingerprint("raw", "", "", b)
}

// RequestParts is what identifies an HTTP-style request.
type RequestParts struct {
	// Method is compared case-insensitively ("post" is POST).
	Method string
	// Target is the path and query, e.g. "/v1/charges?expand=customer".
	Target string
	// Body is the request body.
	Body []byte
	// JSON says Body is JSON and is fingerprinted by its canonical form.
	JSON bool
	// Limits bound the canonical-JSON parse when JSON is set; nil means the
	// defaults.
	Limits *CanonicalLimits
}

// FingerprintRequest fingerprints a request by its method, target and body.
// With p.JSON the body counts by its canonical JSON form, and an empty body
// counts as no body; a body that is not valid JSON gives the CanonicalJSON
// error (callers may fall back to raw bytes).
func FingerprintRequest(p RequestParts) (Fingerprint, error) {
	method := strings.ToUpper(p.Method)
	if !p.JSON || len(p.Body) == 0 {
		return fingerprint("request/raw", method, p.Target, p.Body), nil
	}
	var lim CanonicalLimits
	if p.Limits != nil {
		lim = *p.Limits
	}
	bp := canonicalPool.Get().(*[]byte)
	c, err := canonjson.AppendCanonical((*bp)[:0], p.Body, lim)
	if err != nil {
		canonicalPool.Put(bp)
		return Fingerprint{}, err
	}
	f := fingerprint("request/json", method, p.Target, c)
	if cap(c) <= 64<<10 {
		*bp = c
		canonicalPool.Put(bp)
	}
	return f, nil
}

// fingerprint hashes the length-prefixed encoding of its fields. The body,
// which may be large, goes into the hash as it is, without a copy.
func fingerprint(kind, method, target string, body []byte) Fingerprint {
	d := digestPool.Get().(*digest)
	enc := d.enc[:0]
	field := func(s string) {
		enc = binary.BigEndian.AppendUint64(enc, uint64(len(s)))
		enc = append(enc, s...)
	}
	field("idem/fingerprint/v1")
	field(kind)
	field(method)
	field(target)
	enc = binary.BigEndian.AppendUint64(enc, uint64(len(body)))
	d.h.Reset()
	d.h.Write(enc)
	d.h.Write(body)
	var out [1 + sha256.Size]byte
	out[0] = fingerprintV1
	copy(out[1:], d.h.Sum(d.sum[:0]))
	if cap(enc) <= 64<<10 {
		d.enc = enc
		digestPool.Put(d)
	}
	return Fingerprint{b: string(out[:])}
}

// canonicalPool recycles the buffers request bodies are canonicalised into.
var canonicalPool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// digest is a SHA-256 hash with the buffers fingerprint needs around it.
type digest struct {
	h   hash.Hash
	enc []byte // the encoding of the fields before the body
	sum [sha256.Size]byte
}

// digestPool recycles digests.
var digestPool = sync.Pool{New: func() any { return &digest{h: sha256.New(), enc: make([]byte, 0, 256)} }}
