package idemhttp

import (
	"encoding/json"
	"net/http"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func TestRecordRoundTrip(t *testing.T) {
	for name, c := range map[string]struct {
		header []headerField
		body   string
	}{
		"no header":     {body: `{"id":1}`},
		"empty body":    {header: []headerField{{name: "Location", values: []string{"/x/1"}}}},
		"several":       {header: []headerField{{name: "Content-Type", values: []string{"application/json"}}, {name: "Link", values: []string{"<a>", "<b>", "<c>"}}, {name: "Etag", values: []string{`W/1`}}}, body: "\x00\xffbinary"},
		"escaped value": {header: []headerField{{name: "X-Request-Id", values: []string{`a"b\c`}}, {name: "Vary", values: []string{"Accept"}}}, body: "x"},
		"many headers": {header: []headerField{{name: "A", values: []string{"1"}}, {name: "B", values: []string{"2", "3"}}, {name: "C", values: []string{"4"}},
			{name: "D", values: []string{"5"}}, {name: "E", values: []string{"6"}}, {name: "F", values: []string{"7", "8", "9"}}}, body: "y"},
		"value not UTF-8": {header: []headerField{{name: "Content-Disposition", values: []string{"attachment; filename=\"caf\xe9.pdf\""}}}, body: "z"},
		"some values not UTF-8": {header: []headerField{{name: "Content-Type", values: []string{"text/plain"}}, {name: "Link", values: []string{"<a>", "<\xff>", "<c>"}},
			{name: "Etag", values: []string{"\x80"}}, {name: "Vary", values: []string{"Accept"}}}, body: "w"},
	} {
		t.Run(name, func(t *testing.T) {
			rec := appendResponse(nil, 201, c.header, []byte(c.body))
			if !json.Valid(rec) {
				t.Fatalf("record is not JSON: %s", rec)
			}
			var fields [2]headerField
			var values [2]string
			r, err := readResponse(rec, make([]byte, 0, 4), fields[:0], values[:0])
			if err != nil {
				t.Fatal(err)
			}
			if r.status != 201 || string(r.body) != c.body {
				t.Errorf("status %d body %q, want 201 %q", r.status, r.body, c.body)
			}
			got, want := http.Header{}, http.Header{}
			for _, f := range r.header {
				got[f.name] = f.values
				if cap(f.values) != len(f.values) {
					t.Errorf("%s: values have spare capacity %d > %d", f.name, cap(f.values), len(f.values))
				}
			}
			for _, f := range c.header {
				want[f.name] = f.values
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("header (-want +got):\n%s", d)
			}
		})
	}
}

func TestReadResponseRejects(t *testing.T) {
	for _, rec := range []string{``, `{}`, `{"v":2,"status":200,"body":""}`, `{"v":1,"status":99,"body":""}`, `{"v":1,"status":200,"body":"%%"}`} {
		if _, err := readResponse([]byte(rec), nil, nil, nil); err == nil {
			t.Errorf("readResponse(%s) succeeded", rec)
		}
	}
}

func TestAppendJSONString(t *testing.T) {
	for _, s := range []string{"", "plain", `q"b\s`, "tab\tnl\n\x00\x1f\x7f", "é中😀", "bad\xffutf8\xc3", "<html>&"} {
		enc := appendJSONString(nil, s)
		var got string
		if err := json.Unmarshal(enc, &got); err != nil {
			t.Fatalf("appendJSONString(%q) = %s: %v", s, enc, err)
		}
		// Each invalid byte becomes one U+FFFD.
		want := []rune{}
		for i := 0; i < len(s); {
			r, size := utf8.DecodeRuneInString(s[i:])
			want = append(want, r)
			i += size
		}
		if got != string(want) {
			t.Errorf("appendJSONString(%q) decodes to %q, want %q", s, got, string(want))
		}
	}
}

// TestReplayable checks the header filter both ways it works: walking the
// allow list (a response with as many headers as names allowed) and
// walking the response's header (fewer): the same fields, in the order of
// the allow list, without empty or disallowed ones.
func TestReplayable(t *testing.T) {
	allow := []string{"Content-Type", "Location", "Etag", "Link"}
	set := map[string]bool{}
	for _, n := range allow {
		set[n] = true
	}
	want := []headerField{{name: "Content-Type", values: []string{"a/b"}}, {name: "Etag", values: []string{"1"}}, {name: "Link", values: []string{"<x>", "<y>"}}}
	few := http.Header{"Link": {"<x>", "<y>"}, "Etag": {"1"}, "Content-Type": {"a/b"}}
	many := http.Header{"Link": {"<x>", "<y>"}, "Etag": {"1"}, "Content-Type": {"a/b"}, "Set-Cookie": {"s=1"}, "Location": {}, "X-Other": {"o"}}
	for name, h := range map[string]http.Header{"fewer headers than names": few, "more headers than names": many} {
		for range 20 { // map order varies from run to run
			got := replayable(nil, h, allow, set)
			if d := cmp.Diff(want, got, cmp.AllowUnexported(headerField{})); d != "" {
				t.Fatalf("%s (-want +got):\n%s", name, d)
			}
		}
	}
}

// TestDecodeRecordedResponse: the exported decoder reads a record as
// replay does, in the fast path's form, with header_bytes, and reformatted
// by a store, and refuses what is not a recorded response.
func TestDecodeRecordedResponse(t *testing.T) {
	for name, c := range map[string]struct {
		rec        string
		wantStatus int
		wantHeader http.Header
		wantBody   string
	}{
		"as written": {
			rec:        string(appendResponse(nil, 201, []headerField{{name: "Content-Type", values: []string{"application/json"}}, {name: "Link", values: []string{"<a>", "<b>"}}}, []byte(`{"id":1}`))),
			wantStatus: 201, wantHeader: http.Header{"Content-Type": {"application/json"}, "Link": {"<a>", "<b>"}}, wantBody: `{"id":1}`,
		},
		"header_bytes": {
			rec:        string(appendResponse(nil, 200, []headerField{{name: "Content-Type", values: []string{"text/plain"}}, {name: "Content-Disposition", values: []string{"attachment; filename=\"caf\xe9.pdf\""}}}, []byte("\xff"))),
			wantStatus: 200, wantHeader: http.Header{"Content-Type": {"text/plain"}, "Content-Disposition": {"attachment; filename=\"caf\xe9.pdf\""}}, wantBody: "\xff",
		},
		"reformatted": {
			rec:        `{ "body": "eA==", "status": 404, "v": 1, "header": {"Etag": ["\u0031"]} }`,
			wantStatus: 404, wantHeader: http.Header{"Etag": {"1"}}, wantBody: "x",
		},
		"no header, empty body": {rec: `{"v":1,"status":204,"body":""}`, wantStatus: 204, wantHeader: http.Header{}},
	} {
		t.Run(name, func(t *testing.T) {
			status, header, body, err := DecodeRecordedResponse([]byte(c.rec))
			if err != nil {
				t.Fatal(err)
			}
			if status != c.wantStatus || string(body) != c.wantBody {
				t.Errorf("status %d body %q, want %d %q", status, body, c.wantStatus, c.wantBody)
			}
			if d := cmp.Diff(c.wantHeader, header); d != "" {
				t.Errorf("header (-want +got):\n%s", d)
			}
		})
	}
	for _, rec := range []string{``, `null`, `{"order":42}`, `"done"`, `{"v":2,"status":200,"body":""}`, `{"v":1,"status":99,"body":""}`, `{"v":1,"status":200,"body":"%%"}`} {
		if _, _, _, err := DecodeRecordedResponse([]byte(rec)); err == nil {
			t.Errorf("DecodeRecordedResponse(%q): no error", rec)
		}
	}
}
