package idemhttp

import (
	"testing"
	"unsafe"
)

// TestParseResponseFastPath checks that records appendResponse writes
// without escapes are read by parseResponse itself, not the fallback.
func TestParseResponseFastPath(t *testing.T) {
	for name, c := range map[string]struct {
		header []headerField
		body   string
	}{
		"no header":  {body: `{"id":1}`},
		"empty body": {header: []headerField{{name: "Location", values: []string{"/x/1"}}}},
		"body text in a value": {header: []headerField{{name: "Link", values: []string{`<a>; rel=body`, `,body:`}}},
			body: `,"body":"`},
		"braces in values": {header: []headerField{{name: "Etag", values: []string{`}`, `{}}`}}, {name: "X-Request-Id", values: []string{"]},{"}}},
			body: `}`},
		"several": {header: []headerField{{name: "Content-Type", values: []string{"application/json"}}, {name: "Etag", values: []string{"W/1", "x"}}},
			body: "\x00\xffbinary"},
	} {
		t.Run(name, func(t *testing.T) {
			rec := appendResponse(nil, 201, c.header, []byte(c.body))
			r, ok := parseResponse(rec, nil, nil, nil)
			if !ok {
				t.Fatalf("parseResponse(%s) failed", rec)
			}
			if r.status != 201 || string(r.body) != c.body || len(r.header) != len(c.header) {
				t.Fatalf("parseResponse(%s) = %d %q %v", rec, r.status, r.body, r.header)
			}
			for i, f := range r.header {
				if f.name != c.header[i].name || len(f.values) != len(c.header[i].values) {
					t.Fatalf("field %d: %v, want %v", i, f, c.header[i])
				}
				for j, v := range f.values {
					if v != c.header[i].values[j] {
						t.Errorf("field %s value %d: %q, want %q", f.name, j, v, c.header[i].values[j])
					}
				}
			}
		})
	}
}

// TestParseResponseDeclines checks that parseResponse leaves to the
// fallback what appendResponse does not write.
func TestParseResponseDeclines(t *testing.T) {
	for _, rec := range []string{
		``,
		`{"v":1,"status":201,"body":"eA=="`,
		`{"v":1,"status":201,"body":"eA=="} `,
		`{"v":1,"status":201 ,"body":"eA=="}`,
		`{"v":1,"status":201,"header":{"A":["1"]},"body":"e"A=="}`,
		`{"v":1,"status":201,"header":{"A":["1"]}},"body":"eA=="}`,
		`{"v":1,"status":201,"header":{"A":["\u0031"]},"body":"eA=="}`,
		`{"v":1,"status":201,"header":{"A":"1"},"body":"eA=="}`,
		`{"v":1,"status":201,"header":{"A":["1"]},"body":"e\\A=="}`,
		`{"v":1,"status":201,"header":{"A":["1"],},"body":"eA=="}`,
		`{"status":201,"v":1,"body":"eA=="}`,
		`{"v":1,"status":2010,"body":"eA=="}`,
		// Found by FuzzReadResponse: not JSON, or JSON that encoding/json
		// reads otherwise.
		`{"v":1,"status":0200,"body":""}`,
		"{\"v\":1,\"status\":200,\"header\":{\"A\":[\"\x01\"]},\"body\":\"\"}",
		"{\"v\":1,\"status\":200,\"body\":\"eA\n==\"}",
		"{\"v\":1,\"status\":200,\"header\":{\"A\":[\"\xff\"]},\"body\":\"\"}",
		"{\"v\":1,\"status\":200,\"header\":{\"A\xff\":[\"1\"]},\"body\":\"\"}",
	} {
		if r, ok := parseResponse([]byte(rec), nil, nil, nil); ok {
			t.Errorf("parseResponse(%s) = %v, want false", rec, r)
		}
	}
}

// TestExchangeSize keeps the per-request exchange within its allocation
// size class.
func TestExchangeSize(t *testing.T) {
	if n := unsafe.Sizeof(exchange{}); n > 512 {
		t.Errorf("exchange is %d bytes, over the 512-byte size class", n)
	}
}
