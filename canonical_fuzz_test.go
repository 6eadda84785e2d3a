package idem_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/internal/canonjson"
)

// jsonErrors are the sentinels a *JSONError may wrap.
var jsonErrors = []error{
	idem.ErrJSONSyntax, idem.ErrJSONDuplicateName, idem.ErrJSONInvalidUTF8, idem.ErrJSONLoneSurrogate,
	idem.ErrJSONNumberRange, idem.ErrJSONTooDeep, idem.ErrJSONTooLarge,
}

// canonicalSeeds are the inputs of TestS13CanonicalJSONRejects and
// TestFingerprintJSON, and edges of the grammar.
var canonicalSeeds = []string{
	`{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, `[{"x":{"b":1,"b":2}}]`, "\"a\xffb\"", "{\"\xfe\":1}", "\"\xed\xa0\x80\"",
	`"\ud800"`, `"\udc00"`, `{"\udfff":1}`, `"\ud83d\ude00"`, `[[[]]]`, `[[[[]]]]`, `[1,2]`, `[1,22]`, `1e400`, `-1e-400`,
	`{"a":1,"b":[1,2],"c":{"x":"é","y":null}}`, `{"c":{"y":null,"x":"é"},"b":[1,2],"a":1}`,
	" {\n \"a\" : 1 , \"b\" : [ 1 , 2 ] , \"c\" : { \"x\" : \"é\" , \"y\" : null } } ", `{"a":1.0,"b":[1e0,2],"c":{"x":"\u00e9","y":null}}`,
	``, ` `, `nul`, `01`, `[1,]`, "\xef\xbb\xbf{}", `"\u0000"`, `9007199254740993`, `1E21`, `0.000001`, `1e-7`,
}

// longDigits matches a run of more than 15 digits.
var longDigits = regexp.MustCompile(`[0-9]{16}`)

// FuzzCanonicalJSON checks CanonicalJSON, FingerprintJSON and
// FingerprintRequest on the public API, under fuzzed limits: accepted
// input is valid JSON in valid UTF-8 within the limits, its canonical form
// is valid JSON and a fixed point (canonical(canonical(x)) ==
// canonical(x)) and fingerprints as the input does; valid JSON is only
// refused for what RFC 8785 cannot canonicalise or the limits; every
// refusal is a *JSONError wrapping exactly one ErrJSON… sentinel that
// fits the input, and the fingerprints refuse it with the same error.
func FuzzCanonicalJSON(f *testing.F) {
	inputs, _ := filepath.Glob(filepath.Join("internal", "canonjson", "testdata", "rfc8785", "input", "*.json"))
	for _, in := range inputs {
		if src, err := os.ReadFile(in); err == nil {
			f.Add(src, uint16(0), uint8(0))
		}
	}
	for i, s := range canonicalSeeds {
		f.Add([]byte(s), uint16(i%7), uint8(i%4))
	}
	f.Fuzz(func(t *testing.T, src []byte, maxBytes uint16, maxDepth uint8) {
		lim := &idem.CanonicalLimits{MaxBytes: int(maxBytes), MaxDepth: int(maxDepth)}
		effBytes, effDepth := int(maxBytes), int(maxDepth)
		if effBytes == 0 {
			effBytes = 8 << 20
		}
		if effDepth == 0 {
			effDepth = 128
		}
		valid := json.Valid(src) && utf8.Valid(src)
		out, err := idem.CanonicalJSON(src, lim)
		fp, fpErr := idem.FingerprintJSON(src, lim)
		rq, rqErr := idem.FingerprintRequest(idem.RequestParts{Method: "post", Target: "/t", Body: src, JSON: true, Limits: lim})
		if err != nil {
			var je *idem.JSONError
			if !errors.As(err, &je) || out != nil {
				t.Fatalf("CanonicalJSON(%q) = %q, %v (%T); want a *JSONError alone", src, out, err, err)
			}
			n := 0
			for _, s := range jsonErrors {
				if errors.Is(err, s) {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("CanonicalJSON(%q): error %v matches %d sentinels", src, err, n)
			}
			switch {
			case len(src) > effBytes != errors.Is(err, idem.ErrJSONTooLarge):
				t.Fatalf("CanonicalJSON(%d bytes, limit %d): %v", len(src), effBytes, err)
			case errors.Is(err, idem.ErrJSONSyntax) && json.Valid(src):
				t.Fatalf("CanonicalJSON(%q): ErrJSONSyntax for input encoding/json accepts", src)
			case errors.Is(err, idem.ErrJSONInvalidUTF8) && utf8.Valid(src):
				t.Fatalf("CanonicalJSON(%q): ErrJSONInvalidUTF8 for valid UTF-8", src)
			case errors.Is(err, idem.ErrJSONTooDeep) && valid && idem.JSONDepth(src) <= effDepth:
				t.Fatalf("CanonicalJSON(%q): %v with depth %d, limit %d", src, err, idem.JSONDepth(src), effDepth)
			case valid && len(src) <= effBytes && idem.JSONDepth(src) <= effDepth &&
				!errors.Is(err, idem.ErrJSONDuplicateName) && !errors.Is(err, idem.ErrJSONLoneSurrogate) && !errors.Is(err, idem.ErrJSONNumberRange):
				t.Fatalf("CanonicalJSON(%q) refuses valid JSON within the limits: %v", src, err)
			}
			if fpErr == nil || fpErr.Error() != err.Error() || !fp.IsZero() {
				t.Fatalf("FingerprintJSON(%q) = %v, %v; CanonicalJSON says %v", src, fp, fpErr, err)
			}
			if len(src) > 0 && (rqErr == nil || rqErr.Error() != err.Error()) {
				t.Fatalf("FingerprintRequest(%q): %v; CanonicalJSON says %v", src, rqErr, err)
			}
			return
		}
		switch {
		case !valid:
			t.Fatalf("CanonicalJSON accepted %q, which is not JSON in UTF-8", src)
		case len(src) > effBytes:
			t.Fatalf("CanonicalJSON accepted %d bytes, limit %d", len(src), effBytes)
		case idem.JSONDepth(src) > effDepth:
			t.Fatalf("CanonicalJSON accepted %q of depth %d, limit %d", src, idem.JSONDepth(src), effDepth)
		case !json.Valid(out) || !utf8.Valid(out):
			t.Fatalf("CanonicalJSON(%q) = %q, not JSON", src, out)
		case len(out) > len(src) && bytes.Count(src, []byte(`\`)) == 0 && !bytes.ContainsAny(src, "eE.") && !bytes.Contains(src, []byte("-0")) &&
			!longDigits.Match(src):
			// Without escapes, exponents, fractions, negative zero or
			// integers of more than 15 digits (which round to a double, and
			// may gain a digit: 9999999999999999 is 10000000000000000)
			// nothing grows: only whitespace is dropped.
			t.Fatalf("CanonicalJSON(%q) = %q grew", src, out)
		}
		again, err := idem.CanonicalJSON(out, nil)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("not a fixed point: CanonicalJSON(%q) = %q, %v", out, again, err)
		}
		// Fingerprints are of the exact form (numbers RFC 8785 would round
		// kept exact), which is RFC 8785's but for those numbers: it
		// canonicalises to out, and is its own exact form.
		exact, err := canonjson.AppendExact(nil, src, *lim)
		if err != nil {
			t.Fatalf("AppendExact(%q): %v, where CanonicalJSON succeeds", src, err)
		}
		if again, err := idem.CanonicalJSON(exact, nil); err != nil || !bytes.Equal(again, out) {
			t.Fatalf("CanonicalJSON(AppendExact(%q) = %q) = %q, %v; want %q", src, exact, again, err, out)
		}
		if again, err := canonjson.AppendExact(nil, exact, canonjson.Limits{}); err != nil || !bytes.Equal(again, exact) {
			t.Fatalf("not a fixed point: AppendExact(%q) = %q, %v", exact, again, err)
		}
		fpOut, err := idem.FingerprintJSON(exact, nil)
		if fpErr != nil || err != nil || fp != fpOut || fp.IsZero() {
			t.Fatalf("FingerprintJSON(%q) = %v, %v; of its exact form %v, %v", src, fp, fpErr, fpOut, err)
		}
		if fpCanon, _ := idem.FingerprintJSON(out, nil); bytes.Equal(exact, out) != (fpCanon == fp) {
			t.Fatalf("FingerprintJSON(%q) = %v, of its canonical form %v; exact form %q, canonical %q", src, fp, fpCanon, exact, out)
		}
		if len(src) == 0 {
			return
		}
		rqOut, err := idem.FingerprintRequest(idem.RequestParts{Method: "POST", Target: "/t", Body: exact, JSON: true})
		if rqErr != nil || err != nil || rq != rqOut {
			t.Fatalf("FingerprintRequest(%q) = %v, %v; of its exact form, upper-case method %v, %v", src, rq, rqErr, rqOut, err)
		}
		if raw, _ := idem.FingerprintRequest(idem.RequestParts{Method: "POST", Target: "/t", Body: out}); raw == rq {
			t.Fatalf("the raw and the JSON fingerprint of %q are the same", out)
		}
	})
}

// FuzzCheckPayload checks that CheckPayload accepts exactly the valid JSON
// in valid UTF-8 of at most maxPayload bytes (DefaultMaxPayload when not
// positive), refusing larger payloads with a *PayloadTooLargeError that
// says the size and the limit, and the others with ErrInvalidPayload.
func FuzzCheckPayload(f *testing.F) {
	for i, s := range append(canonicalSeeds, strings.Repeat("[", 600)+strings.Repeat("]", 600)) {
		f.Add([]byte(s), int32(i%9-1))
	}
	f.Fuzz(func(t *testing.T, b []byte, maxPayload int32) {
		limit := int(maxPayload)
		if limit <= 0 {
			limit = idem.DefaultMaxPayload
		}
		err := idem.CheckPayload("request", b, int(maxPayload))
		if len(b) > limit {
			var pe *idem.PayloadTooLargeError
			if !errors.As(err, &pe) || !errors.Is(err, idem.ErrPayloadTooLarge) || pe.Size != len(b) || pe.Limit != limit || pe.What != "request" {
				t.Fatalf("CheckPayload(%d bytes, %d) = %v; want a *PayloadTooLargeError", len(b), maxPayload, err)
			}
			return
		}
		valid := json.Valid(b) && utf8.Valid(b)
		if valid != (err == nil) || err != nil && !errors.Is(err, idem.ErrInvalidPayload) {
			t.Fatalf("CheckPayload(%q) = %v; want valid %v", b, err, valid)
		}
	})
}
