package idem_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/idemgo/idem"
)

func fpJSON(t *testing.T, doc string) idem.Fingerprint {
	t.Helper()
	f, err := idem.FingerprintJSON([]byte(doc), nil)
	if err != nil {
		t.Fatalf("FingerprintJSON(%s): %v", doc, err)
	}
	return f
}

func TestFingerprintJSON(t *testing.T) {
	base := fpJSON(t, `{"a":1,"b":[1,2],"c":{"x":"é","y":null}}`)
	for name, doc := range map[string]string{
		"member order":    `{"c":{"y":null,"x":"é"},"b":[1,2],"a":1}`,
		"whitespace":      " {\n \"a\" : 1 , \"b\" : [ 1 , 2 ] , \"c\" : { \"x\" : \"é\" , \"y\" : null } } ",
		"escape style":    `{"a":1,"b":[1,2],"c":{"x":"\u00e9","y":null}}`,
		"number spelling": `{"a":1.0,"b":[1e0,2],"c":{"x":"é","y":null}}`,
	} {
		if got := fpJSON(t, doc); got != base {
			t.Errorf("%s: fingerprint %s, want %s", name, got, base)
		}
	}
	for name, doc := range map[string]string{
		"array order":   `{"a":1,"b":[2,1],"c":{"x":"é","y":null}}`,
		"value":         `{"a":2,"b":[1,2],"c":{"x":"é","y":null}}`,
		"null vs empty": `{"a":1,"b":[1,2],"c":{"x":"é"}}`,
	} {
		if got := fpJSON(t, doc); got == base {
			t.Errorf("%s: same fingerprint as the base document", name)
		}
	}
}

func TestFingerprintJSONErrors(t *testing.T) {
	deep := strings.Repeat("[", 10) + strings.Repeat("]", 10)
	for _, tc := range []struct {
		name string
		doc  string
		lim  *idem.CanonicalLimits
		want error
	}{
		{"syntax", `{"a":}`, nil, idem.ErrJSONSyntax},
		{"duplicate", `{"a":1,"a":2}`, nil, idem.ErrJSONDuplicateName},
		{"invalid utf-8", "\"\xff\"", nil, idem.ErrJSONInvalidUTF8},
		{"lone surrogate", `"\ud800"`, nil, idem.ErrJSONLoneSurrogate},
		{"number range", `1e400`, nil, idem.ErrJSONNumberRange},
		{"too deep", deep, &idem.CanonicalLimits{MaxDepth: 5}, idem.ErrJSONTooDeep},
		{"too large", `"0123456789"`, &idem.CanonicalLimits{MaxBytes: 5}, idem.ErrJSONTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := idem.FingerprintJSON([]byte(tc.doc), tc.lim)
			var je *idem.JSONError
			if !errors.Is(err, tc.want) || !errors.As(err, &je) {
				t.Errorf("FingerprintJSON(%q) = %v, want %v as a *JSONError", tc.doc, err, tc.want)
			}
		})
	}
}

func TestFingerprintRequest(t *testing.T) {
	fp := func(p idem.RequestParts) idem.Fingerprint {
		t.Helper()
		f, err := idem.FingerprintRequest(p)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	base := idem.RequestParts{Method: "POST", Target: "/v1/charges?x=1", Body: []byte(`{"a":1,"b":2}`), JSON: true}
	same := map[string]idem.RequestParts{
		"method case":  {Method: "post", Target: base.Target, Body: base.Body, JSON: true},
		"member order": {Method: "POST", Target: base.Target, Body: []byte(`{ "b":2, "a":1 }`), JSON: true},
	}
	for name, p := range same {
		if fp(p) != fp(base) {
			t.Errorf("%s: fingerprints differ", name)
		}
	}
	differ := map[string]idem.RequestParts{
		"method":        {Method: "PATCH", Target: base.Target, Body: base.Body, JSON: true},
		"path":          {Method: "POST", Target: "/v1/refunds?x=1", Body: base.Body, JSON: true},
		"query":         {Method: "POST", Target: "/v1/charges?x=2", Body: base.Body, JSON: true},
		"body":          {Method: "POST", Target: base.Target, Body: []byte(`{"a":1,"b":3}`), JSON: true},
		"raw body":      {Method: "POST", Target: base.Target, Body: base.Body},
		"no body":       {Method: "POST", Target: base.Target},
		"target ≠ body": {Method: "POST", Target: base.Target + `{"a":1,"b":2}`, JSON: true},
	}
	for name, p := range differ {
		if fp(p) == fp(base) {
			t.Errorf("%s: same fingerprint as the base request", name)
		}
	}
	raw1 := fp(idem.RequestParts{Method: "POST", Target: "/", Body: []byte("a=1&b=2")})
	raw2 := fp(idem.RequestParts{Method: "POST", Target: "/", Body: []byte("b=2&a=1")})
	if raw1 == raw2 {
		t.Error("raw bodies are compared byte for byte")
	}
	if _, err := idem.FingerprintRequest(idem.RequestParts{Method: "POST", Body: []byte("{"), JSON: true}); !errors.Is(err, idem.ErrJSONSyntax) {
		t.Errorf("invalid JSON body: %v", err)
	}
	if fp(idem.RequestParts{Method: "POST", Target: "/", JSON: true}) != fp(idem.RequestParts{Method: "POST", Target: "/"}) {
		t.Error("an empty JSON body should count as no body")
	}
}

func TestFingerprintBytesRoundTrip(t *testing.T) {
	f := idem.FingerprintBytes([]byte("hello"))
	if f.IsZero() || len(f.Bytes()) != 33 || !strings.HasPrefix(f.String(), "v1:") {
		t.Fatalf("fingerprint %s (%d bytes)", f, len(f.Bytes()))
	}
	g, err := idem.ParseFingerprint(f.Bytes())
	if err != nil || g != f {
		t.Fatalf("ParseFingerprint round trip: %v, %v", g, err)
	}
	for name, b := range map[string][]byte{"empty": nil, "short": f.Bytes()[:10], "bad version": append([]byte{9}, f.Bytes()[1:]...)} {
		if _, err := idem.ParseFingerprint(b); !errors.Is(err, idem.ErrInvalidFingerprint) {
			t.Errorf("%s: ParseFingerprint = %v", name, err)
		}
	}
	if idem.FingerprintBytes([]byte("a")) == idem.FingerprintBytes([]byte("b")) {
		t.Error("different bytes, same fingerprint")
	}
	if (idem.Fingerprint{}).String() != "v0:" {
		t.Error("zero fingerprint string")
	}
}

// TestFingerprintIsAValue: a Fingerprint is rebuilt from its bytes and
// compared without allocating, and Bytes is a copy its caller may change.
func TestFingerprintIsAValue(t *testing.T) {
	f := idem.FingerprintBytes([]byte("hello"))
	b := f.Bytes()
	allocs := testing.AllocsPerRun(100, func() {
		g, err := idem.ParseFingerprint(b)
		if err != nil || g != f || g.IsZero() {
			t.Fatalf("ParseFingerprint = %v, %v", g, err)
		}
	})
	if allocs != 0 {
		t.Errorf("ParseFingerprint and == allocate %v times", allocs)
	}
	b[1] ^= 0xff
	if g, _ := idem.ParseFingerprint(f.Bytes()); g != f {
		t.Error("changing the bytes Bytes returned changed the fingerprint")
	}
	if z := (idem.Fingerprint{}); !z.IsZero() || len(z.Bytes()) != 0 {
		t.Errorf("zero Fingerprint: IsZero %v, Bytes %x", z.IsZero(), z.Bytes())
	}
}
