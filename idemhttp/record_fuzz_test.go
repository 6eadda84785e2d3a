package idemhttp

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/internal/pgstorable"
)

// recordSeeds are records from TestParseResponseDeclines,
// TestReadResponseRejects and edges of the format.
var recordSeeds = []string{
	``, `{}`, `{"v":2,"status":200,"body":""}`, `{"v":1,"status":99,"body":""}`, `{"v":1,"status":200,"body":"%%"}`,
	`{"v":1,"status":201,"body":"eA=="`, `{"v":1,"status":201,"body":"eA=="} `, `{"v":1,"status":201 ,"body":"eA=="}`,
	`{"v":1,"status":201,"header":{"A":["1"]},"body":"e"A=="}`, `{"v":1,"status":201,"header":{"A":["1"]}},"body":"eA=="}`,
	`{"v":1,"status":201,"header":{"A":["\u0031"]},"body":"eA=="}`, `{"v":1,"status":201,"header":{"A":"1"},"body":"eA=="}`,
	`{"v":1,"status":201,"header":{"A":["1"]},"body":"e\\A=="}`, `{"v":1,"status":201,"header":{"A":["1"],},"body":"eA=="}`,
	`{"status":201,"v":1,"body":"eA=="}`, `{"v":1,"status":2010,"body":"eA=="}`, `{"v":1,"status":201,"body":"eA=="}`,
	`{"v":1,"status":200,"header":{"Etag":["}","{}}"],"X-Request-Id":["]},{"]},"body":"fQ=="}`,
	`{"v":1,"status":200,"header_bytes":{"Content-Disposition":["Y2Fm6Q=="]},"body":""}`,
	`{"v":1,"status":200,"header":{"Content-Type":["text/plain"]},"header_bytes":{"Link":["PGE+","PP8+"]},"body":"dw=="}`,
	`{"v":1,"status":0200,"body":""}`, `{"v":1,"status":200,"header":{"A":["1"],"A":["2"]},"body":""}`,
	"{\"v\":1,\"status\":200,\"header\":{\"A\":[\"\x01\"]},\"body\":\"\"}", "{\"v\":1,\"status\":200,\"body\":\"eA\n==\"}",
	"{\"v\":1,\"status\":200,\"header\":{\"A\":[\"\xff\"]},\"body\":\"\"}", `{"V":1,"Status":200,"Body":null}`,
	`{"v":1,"status":200,"header":{"A":[]},"body":""}`, `{"v":1,"status":200,"header":{"":[""]},"body":""}`,
}

// headerMap is the header a replay writes from fields: each field set in
// turn, so a later field of the same name replaces an earlier one.
func headerMap(fields []headerField) http.Header {
	h := http.Header{}
	for _, f := range fields {
		h[f.name] = f.values
	}
	return h
}

// FuzzReadResponse checks readResponse on any stored bytes: its fast path,
// parseResponse, accepts only records that the encoding/json fallback,
// decodeResponse, also reads, and reads them as it does (status, header
// as a replay writes it, body); readResponse fails exactly when both
// paths refuse; what it returns holds no reference to the record; and a
// read status is always a valid three-digit one.
func FuzzReadResponse(f *testing.F) {
	for _, s := range recordSeeds {
		f.Add([]byte(s))
	}
	f.Add(appendResponse(nil, 201, []headerField{{name: "Content-Type", values: []string{"application/json"}}, {name: "Etag", values: []string{"W/1", "x"}}}, []byte("\x00\xffbinary")))
	f.Add(appendResponse(nil, 200, []headerField{{name: "X-Request-Id", values: []string{`a"b\c`, "caf\xe9"}}}, []byte("x")))
	f.Fuzz(func(t *testing.T, b []byte) {
		orig := bytes.Clone(b)
		fast, ok := parseResponse(b, nil, nil, nil)
		slow, serr := decodeResponse(b)
		got, err := readResponse(b, nil, nil, nil)
		if !bytes.Equal(b, orig) {
			t.Fatalf("the record was modified")
		}
		if ok {
			if serr != nil {
				t.Fatalf("parseResponse accepts %q, which decodeResponse refuses: %v", b, serr)
			}
			if !json.Valid(b) {
				t.Fatalf("parseResponse accepts %q, which is not JSON", b)
			}
			want := response{status: slow.Status, body: slow.Body, header: nil}
			for name, v := range slow.Header {
				want.header = append(want.header, headerField{name: name, values: v})
			}
			if fast.status != want.status || !bytes.Equal(fast.body, want.body) {
				t.Fatalf("%q: parseResponse reads status %d body %q, decodeResponse %d %q", b, fast.status, fast.body, want.status, want.body)
			}
			// A field without values (nil from one, empty from the other)
			// replays as none.
			if d := cmp.Diff(headerMap(want.header), headerMap(fast.header), cmpopts.EquateEmpty()); d != "" {
				t.Fatalf("%q: header of parseResponse (+) and decodeResponse (-):\n%s", b, d)
			}
			for _, f := range fast.header {
				if cap(f.values) != len(f.values) {
					t.Fatalf("%s: values have spare capacity", f.name)
				}
			}
		}
		if (err == nil) != (ok || serr == nil) {
			t.Fatalf("readResponse(%q): %v; fast path %v, fallback %v", b, err, ok, serr)
		}
		if err != nil {
			return
		}
		if got.status < 100 || got.status > 999 {
			t.Fatalf("readResponse(%q): status %d", b, got.status)
		}
		body, hdr := bytes.Clone(got.body), headerMap(got.header).Clone()
		for i := range b {
			b[i] = 'x'
		}
		if !bytes.Equal(body, got.body) || !cmp.Equal(hdr, headerMap(got.header)) {
			t.Fatalf("the response read from %q changed with the record", orig)
		}
	})
}

// FuzzRecordRoundTrip checks that a recorded response reads back as it was
// written: the status, every header field with its values (text that is
// not UTF-8 included) and the body; that the record is a valid payload for
// every store; and that a record free of escapes takes the fast path.
func FuzzRecordRoundTrip(f *testing.F) {
	f.Add(uint16(201), "Content-Type", "application/json", "", "Etag", "W/1", []byte(`{"id":1}`))
	f.Add(uint16(200), "Link", "<a>; rel=body", `,body:`, "", "", []byte(`,"body":"`))
	f.Add(uint16(200), "Etag", "}", "{}}", "X-Request-Id", "]},{", []byte("}"))
	f.Add(uint16(204), "X-Request-Id", `a"b\c`, "tab\there", "Vary", "Accept", []byte("\x00\xffbinary"))
	f.Add(uint16(999), "Content-Disposition", "attachment; filename=\"caf\xe9.pdf\"", "\x80", "Link", "<\xff>", []byte{})
	f.Add(uint16(100), "A", "", "\u2028é中😀", "B", "\x00", []byte("y"))
	f.Fuzz(func(t *testing.T, status uint16, n1, v1a, v1b, n2, v2 string, body []byte) {
		st := 100 + int(status)%900
		var fields []headerField
		if n1 != "" && utf8.ValidString(n1) {
			values := []string{v1a}
			if v1b != "" {
				values = append(values, v1b)
			}
			fields = append(fields, headerField{name: n1, values: values})
		}
		if n2 != "" && n2 != n1 && utf8.ValidString(n2) {
			fields = append(fields, headerField{name: n2, values: []string{v2}})
		}
		rec := appendResponse(nil, st, fields, body)
		if err := idem.CheckPayload("result", rec, 1<<30); err != nil {
			t.Fatalf("record %q: %v", rec, err)
		}
		got, err := readResponse(rec, nil, nil, nil)
		if err != nil {
			t.Fatalf("readResponse(%q): %v", rec, err)
		}
		if got.status != st || !bytes.Equal(got.body, body) {
			t.Fatalf("%q reads back as status %d body %q", rec, got.status, got.body)
		}
		if d := cmp.Diff(headerMap(fields), headerMap(got.header)); d != "" || len(got.header) != len(fields) {
			t.Fatalf("%q: header (-written +read):\n%s", rec, d)
		}
		plain := func(s string) bool {
			return utf8.ValidString(s) && strings.IndexFunc(s, func(r rune) bool { return r < 0x20 || r == '"' || r == '\\' }) < 0
		}
		fastable := true
		for _, f := range fields {
			fastable = fastable && plain(f.name)
			for _, v := range f.values {
				fastable = fastable && plain(v)
			}
		}
		if _, ok := parseResponse(rec, nil, nil, nil); ok != fastable {
			t.Fatalf("parseResponse(%q) = %v, want %v", rec, ok, fastable)
		}
	})
}

// FuzzAppendRequest checks the request description recorded for
// operators: it is valid JSON that every store accepts (jsonb included
// when its text holds no NUL), and it reads back as the method, target,
// content type (absent when empty) and body size it was made of, text
// that is not UTF-8 coming back with U+FFFD.
func FuzzAppendRequest(f *testing.F) {
	f.Add("POST", "/v1/charges?expand=customer", "application/json", 17)
	f.Add("GET", "/", "", 0)
	f.Add("PUT", "/a\"b\\c\x01\u2028", "text/plain; charset=\"utf-8\"", 1<<20)
	f.Add("X\xff", "/caf\xe9", "\x00", -1)
	f.Fuzz(func(t *testing.T, method, target, contentType string, n int) {
		rec := appendRequest(nil, method, target, contentType, n)
		if err := idem.CheckPayload("request", rec, 1<<30); err != nil {
			t.Fatalf("%q: %v", rec, err)
		}
		if !strings.Contains(method+target+contentType, "\x00") {
			if err := pgstorable.JSONB(rec); err != nil {
				t.Fatalf("%q: jsonb %v", rec, err)
			}
		}
		var got map[string]any
		if err := json.Unmarshal(rec, &got); err != nil {
			t.Fatal(err)
		}
		want := map[string]any{"method": fix(method), "target": fix(target), "body_bytes": float64(n)}
		if contentType != "" {
			want["content_type"] = fix(contentType)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("%q (-want +got):\n%s", rec, d)
		}
	})
}

// fix is s as encoding/json reads it back after appendJSONString: each
// byte that is not part of valid UTF-8 replaced with U+FFFD.
func fix(s string) string {
	var r []rune
	for _, c := range s {
		r = append(r, c)
	}
	return string(r)
}
