package idem

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"

	"github.com/idemgo/idem/internal/canonjson"
)

// fingerprintV1 is the version byte of the only encoding so far.
//
// One change was made within it: JSON numbers whose value RFC 8785 changes
// (see FingerprintJSON) count by their exact value, where they counted by
// their double. Only requests holding such a number fingerprint otherwise
// than before; a record of one made before the change answers a retry made
// after it with Mismatch, never with another request's answer.
const fingerprintV1 = 1

// Fingerprint identifies a request: a version byte followed by a SHA-256
// digest of a versioned, length-prefixed encoding of what identifies the
// request. Fingerprints are comparable with ==; the zero Fingerprint is
// invalid. Stores keep Bytes() and rebuild it with ParseFingerprint.
//
// A Fingerprint is a value of fixed size: making, copying and comparing one
// allocates nothing, and a record holding one holds no pointer for it.
type Fingerprint struct {
	b [1 + sha256.Size]byte
}

// ParseFingerprint rebuilds a fingerprint from its Bytes.
func ParseFingerprint(b []byte) (Fingerprint, error) {
	if len(b) != 1+sha256.Size || b[0] != fingerprintV1 {
		return Fingerprint{}, fmt.Errorf("%w: %d bytes, version %d", ErrInvalidFingerprint, len(b), firstByte(b))
	}
	var f Fingerprint
	copy(f.b[:], b)
	return f, nil
}

func firstByte(b []byte) int {
	if len(b) == 0 {
		return -1
	}
	return int(b[0])
}

// Bytes returns the binary form: version byte, then digest.
func (f Fingerprint) Bytes() []byte {
	if f.IsZero() {
		return []byte{}
	}
	return f.b[:]
}

// IsZero reports whether f is the zero Fingerprint.
func (f Fingerprint) IsZero() bool { return f.b[0] == 0 }

// String returns "v1:" followed by the hex digest.
func (f Fingerprint) String() string {
	if f.IsZero() {
		return "v0:"
	}
	return fmt.Sprintf("v%d:%s", f.b[0], hex.EncodeToString(f.b[1:]))
}

// FingerprintJSON fingerprints a JSON document by its canonical form, so
// documents that differ only in member order, whitespace or escapes get the
// same fingerprint. Errors are those of CanonicalJSON.
//
// The canonical form is CanonicalJSON's, RFC 8785, but for numbers whose
// value RFC 8785 would change, which count by their exact value: an
// integer beyond 2^53 (9007199254740993, which RFC 8785 writes as
// 9007199254740992), a value below the smallest double (1e-400, written
// 0), digits past a double's precision. Documents differing only in such
// a number are different requests; spellings of one value (100, 1e2,
// 100.0) are not.
func FingerprintJSON(doc []byte, lim *CanonicalLimits) (Fingerprint, error) {
	var l CanonicalLimits
	if lim != nil {
		l = *lim
	}
	c, err := canonjson.AppendExact(make([]byte, 0, len(doc)), doc, l)
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
// With p.JSON the body counts by its canonical JSON form (FingerprintJSON's:
// numbers by their exact value), and an empty body counts as no body; a
// body that is not valid JSON gives the CanonicalJSON error (callers may
// fall back to raw bytes).
func FingerprintRequest(p RequestParts) (Fingerprint, error) {
	method := strings.ToUpper(p.Method)
	if !p.JSON || len(p.Body) == 0 {
		return fingerprint("request/raw", method, p.Target, p.Body), nil
	}
	var lim CanonicalLimits
	if p.Limits != nil {
		lim = *p.Limits
	}
	// The canonical body goes straight after the encoding of the other
	// fields, and its length, unknown until then, is filled in after.
	bp := encodingPool.Get().(*[]byte)
	enc := appendFields((*bp)[:0], "request/json", method, p.Target)
	at := len(enc)
	enc = append(enc, make([]byte, 8)...)
	enc, err := canonjson.AppendExact(enc, p.Body, lim)
	if err != nil {
		putEncoding(bp, enc)
		return Fingerprint{}, err
	}
	binary.BigEndian.PutUint64(enc[at:], uint64(len(enc)-at-8))
	f := sum(enc)
	putEncoding(bp, enc)
	return f, nil
}

// inlineBody is the largest body fingerprint copies into its encoding to
// hash it in one call; larger ones are hashed where they are.
const inlineBody = 16 << 10

// fingerprint hashes the length-prefixed encoding of its fields, the body
// last.
func fingerprint(kind, method, target string, body []byte) Fingerprint {
	if len(body) > inlineBody {
		return fingerprintLarge(kind, method, target, body)
	}
	bp := encodingPool.Get().(*[]byte)
	enc := appendFields((*bp)[:0], kind, method, target)
	enc = binary.BigEndian.AppendUint64(enc, uint64(len(body)))
	enc = append(enc, body...)
	f := sum(enc)
	putEncoding(bp, enc)
	return f
}

// fingerprintLarge is fingerprint for a large body, which goes into the
// hash as it is, without a copy.
func fingerprintLarge(kind, method, target string, body []byte) Fingerprint {
	var buf [128]byte
	enc := appendFields(buf[:0], kind, method, target)
	enc = binary.BigEndian.AppendUint64(enc, uint64(len(body)))
	h := sha256.New()
	h.Write(enc)
	h.Write(body)
	var f Fingerprint
	f.b[0] = fingerprintV1
	h.Sum(f.b[1:1])
	return f
}

// appendFields appends the encoding of the fields before the body: the
// domain string, kind, method and target, each preceded by its length as a
// big-endian uint64.
func appendFields(dst []byte, kind, method, target string) []byte {
	dst = appendField(dst, "idem/fingerprint/v1")
	dst = appendField(dst, kind)
	dst = appendField(dst, method)
	return appendField(dst, target)
}

// appendField appends the length of s as a big-endian uint64, then s.
func appendField(dst []byte, s string) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(len(s)))
	return append(dst, s...)
}

// sum returns the fingerprint of a complete encoding.
func sum(enc []byte) Fingerprint {
	f := Fingerprint{b: [1 + sha256.Size]byte{fingerprintV1}}
	d := sha256.Sum256(enc)
	copy(f.b[1:], d[:])
	return f
}

// encodingPool recycles the buffers fingerprints are encoded in.
var encodingPool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// putEncoding returns bp to encodingPool, with enc as its storage unless
// enc grew large.
func putEncoding(bp *[]byte, enc []byte) {
	if cap(enc) <= 64<<10 {
		*bp = enc[:0]
		encodingPool.Put(bp)
	}
}
