package idem

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"unicode"

	"github.com/idemgo/idem/internal/canonjson"
)

// asciiCase maps the ASCII letters of s with to, and leaves the rest.
func asciiCase(s string, to func(rune) rune) string {
	return strings.Map(func(r rune) rune {
		if r < 0x80 {
			return to(r)
		}
		return r
	}, s)
}

// FuzzParseFingerprint checks that ParseFingerprint accepts exactly the
// 33-byte version-1 encodings, that an accepted one's Bytes and String give
// the input back, and that it refuses everything else with
// ErrInvalidFingerprint and the zero Fingerprint.
func FuzzParseFingerprint(f *testing.F) {
	fp := FingerprintBytes([]byte("opaque\x00bytes")).Bytes()
	f.Add(fp)
	f.Add(fp[:32])
	f.Add(append(bytes.Clone(fp), 0))
	f.Add(append([]byte{2}, fp[1:]...))
	f.Add(append([]byte{0}, fp[1:]...))
	f.Add([]byte{})
	f.Add([]byte{1})
	f.Fuzz(func(t *testing.T, b []byte) {
		orig := bytes.Clone(b)
		got, err := ParseFingerprint(b)
		if len(b) != 33 || b[0] != fingerprintV1 {
			if !errors.Is(err, ErrInvalidFingerprint) || !got.IsZero() || got != (Fingerprint{}) {
				t.Fatalf("ParseFingerprint(%x) = %v, %v; want ErrInvalidFingerprint", b, got, err)
			}
			return
		}
		if err != nil || got.IsZero() || !bytes.Equal(got.Bytes(), orig) {
			t.Fatalf("ParseFingerprint(%x) = %x, %v", orig, got.Bytes(), err)
		}
		if s := got.String(); s != "v1:"+hex.EncodeToString(orig[1:]) {
			t.Fatalf("String() = %q", s)
		}
		b[1] ^= 0xff // the fingerprint holds no reference to its input
		if !bytes.Equal(got.Bytes(), orig) {
			t.Fatalf("the fingerprint changed with its input")
		}
		again, err := ParseFingerprint(got.Bytes())
		if err != nil || again != got {
			t.Fatalf("ParseFingerprint(Bytes()) = %v, %v; want %v", again, err, got)
		}
	})
}

// FuzzFingerprintEncoding checks the two ways fingerprint hashes a body
// (copied into one encoding when small, streamed when large) against each
// other, so that a record fingerprinted with one never mismatches a retry
// fingerprinted with the other; that FingerprintRequest's one-pass JSON
// encoding equals fingerprint of the body's exact form; that the fields are
// length-prefixed (moving bytes between method, target and body changes
// the fingerprint); and that the method's ASCII letters count
// case-insensitively.
func FuzzFingerprintEncoding(f *testing.F) {
	f.Add("POST", "/v1/charges", []byte(`{"b":1,"a":[true,null,"x"]}`), uint16(0))
	f.Add("get", "/", []byte{}, uint16(1))
	f.Add("", "", []byte("x"), uint16(inlineBody))
	f.Add("Delete", "/a?b=c", []byte(" [1, 2.0, \"\\u00e9\"] "), uint16(inlineBody-3))
	f.Fuzz(func(t *testing.T, method, target string, body []byte, pad uint16) {
		// pad stretches the body across inlineBody.
		long := append(bytes.Clone(body), bytes.Repeat([]byte{' '}, int(pad)%(2*inlineBody+8))...)
		for _, b := range [][]byte{body, long} {
			if small, large := fingerprint("raw", method, target, b), fingerprintLarge("raw", method, target, b); small != large {
				t.Fatalf("fingerprint of %d bytes: %v in one encoding, %v streamed", len(b), small, large)
			}
			raw, err := FingerprintRequest(RequestParts{Method: method, Target: target, Body: b})
			if err != nil || raw != fingerprint("request/raw", strings.ToUpper(method), target, b) {
				t.Fatalf("FingerprintRequest raw = %v, %v", raw, err)
			}
			// Methods are tokens, ASCII: only ASCII case is folded the same
			// way both ways (strings.ToLower("İ") upper-cases to "İ").
			lower, _ := FingerprintRequest(RequestParts{Method: asciiCase(method, unicode.ToLower), Target: target, Body: b})
			upper, _ := FingerprintRequest(RequestParts{Method: asciiCase(method, unicode.ToUpper), Target: target, Body: b})
			if lower != raw || upper != raw {
				t.Fatalf("method %q: %v, lower case %v, upper case %v", method, raw, lower, upper)
			}
			if len(target) > 0 {
				moved, _ := FingerprintRequest(RequestParts{Method: method, Target: target[:len(target)-1], Body: append([]byte{target[len(target)-1]}, b...)})
				if moved == raw {
					t.Fatalf("moving the last byte of the target into the body keeps the fingerprint")
				}
			}
			if len(b) == 0 {
				continue
			}
			// The body counts by its exact form (FingerprintJSON's), which
			// is RFC 8785's but for numbers a double cannot hold.
			c, cerr := canonjson.AppendExact(nil, b, canonjson.Limits{})
			j, jerr := FingerprintRequest(RequestParts{Method: method, Target: target, Body: b, JSON: true})
			if (cerr == nil) != (jerr == nil) {
				t.Fatalf("canonjson.AppendExact: %v; FingerprintRequest JSON: %v", cerr, jerr)
			}
			if cerr == nil && j != fingerprint("request/json", strings.ToUpper(method), target, c) {
				t.Fatalf("FingerprintRequest JSON of %q = %v; not the fingerprint of its exact form %q", b, j, c)
			}
		}
	})
}
