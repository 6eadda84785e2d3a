package idem_test

import (
	"testing"

	"github.com/idemgo/idem"
)

// TestFingerprintGolden pins the fingerprints of a few inputs: stored
// records are compared with fingerprints computed later, so the encoding
// may never change within a version (but for the one change that
// fingerprintV1 describes, which these inputs do not meet).
func TestFingerprintGolden(t *testing.T) {
	must := func(f idem.Fingerprint, err error) idem.Fingerprint {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	for name, c := range map[string]struct {
		got  idem.Fingerprint
		want string
	}{
		"json": {must(idem.FingerprintJSON([]byte(`{"b":1,"a":[true,null,"x"]}`), nil)),
			"v1:9844afe5922696c5caa91904435de933e37d64bf2482e1dfe19c60fbecdb72d5"},
		"bytes": {idem.FingerprintBytes([]byte("opaque\x00bytes")),
			"v1:6e77102b71c2315160c311425c8ce11d246f36f1da1e95267c26bd40bb738cde"},
		"request json": {must(idem.FingerprintRequest(idem.RequestParts{Method: "post", Target: "/v1/charges?x=1", Body: []byte(`{"amount":100, "currency":"EUR"}`), JSON: true})),
			"v1:61eba96224253b7dcddded23f1aad56a62b0044b61a2cbbb70c70d6c59ceeb5f"},
		"request raw": {must(idem.FingerprintRequest(idem.RequestParts{Method: "PATCH", Target: "/x", Body: []byte("a=1&b=2")})),
			"v1:7b2a9b4dd9b4fda01eb595e564c45a42621a9639758fe2490f1b157c5f462af5"},
		// Numbers RFC 8785 keeps exact: their canonical form, as before
		// numbers it would round were kept exact.
		"json numbers": {must(idem.FingerprintJSON([]byte(`{"amount":19.99,"big":1e21,"small":0.000001,"tiny":1.5e-7,"neg":-0.0,"exp":1E+2,"long":1234567890123456,"frac":0.30000000000000004}`), nil)),
			"v1:4c68fd0e149d8c8851f46fe2df624c6c97638ce72a4a79de22147b71333853b4"},
		"request json numbers": {must(idem.FingerprintRequest(idem.RequestParts{Method: "POST", Target: "/v1/x", Body: []byte(`[12.50, 9007199254740992, 1e300, -2.5e-10]`), JSON: true})),
			"v1:c3d345d0a9df61899c70f57659d02f618b7cf67fbe0308ef5b3b4da058aaf123"},
		"request empty": {must(idem.FingerprintRequest(idem.RequestParts{Method: "POST", Target: "/", JSON: true})),
			"v1:ce79e4cf727aecde586998fd7803095e4350ae4e36b9638bbf93b6099c27cf42"},
	} {
		if c.got.String() != c.want {
			t.Errorf("%s: fingerprint %s, want %s", name, c.got, c.want)
		}
	}
}
