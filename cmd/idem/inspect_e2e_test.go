package main_test

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	_ "modernc.org/sqlite"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/store/sqlitestore"
)

// TestInspectDecodesRecordedResponses: idem inspect shows a response
// recorded by the idemhttp middleware decoded beside the record's result:
// a JSON body as JSON, a text body as text, another in base64, and header
// values that are not UTF-8 (recorded as header_bytes) as text too. A
// record of idem.Do, even one whose result looks like a response, is shown
// as it is stored, without "response".
func TestInspectDecodesRecordedResponses(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "idem.db")
	if r := runIdem(t, t.TempDir(), nil, "migrate", "--store", "sqlite:"+path); r.code != 0 {
		t.Fatalf("idem migrate: exit %d, stderr %q", r.code, r.stderr)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	st, err := sqlitestore.New(db, sqlitestore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		status int
		header http.Header
		body   string
	}
	answers := map[string]answer{
		"json":     {201, http.Header{"Content-Type": {"application/json; charset=utf-8"}}, `{"id":1,"note":"<b> & co"}`},
		"problem":  {422, http.Header{"Content-Type": {"application/problem+json"}}, `{"title":"no"}`},
		"not-json": {200, http.Header{"Content-Type": {"application/json"}}, "not json"},
		"text":     {200, http.Header{"Content-Type": {"text/plain"}, "Content-Disposition": {"attachment; filename=\"caf\xe9.txt\""}}, "héllo <world>"},
		"binary":   {200, http.Header{"Content-Type": {"application/octet-stream"}}, "\x00\xff"},
		// JSON that parses, with bytes in a string that are not UTF-8.
		"json-not-utf8": {200, http.Header{"Content-Type": {"application/json"}}, "{\"a\":\"\xff\"}"},
		"empty":         {204, http.Header{}, ""},
	}
	h := idemhttp.Middleware(idemhttp.Config{Store: st})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := answers[strings.TrimPrefix(r.URL.Path, "/")]
		for name, v := range a.header {
			w.Header()[name] = v
		}
		w.WriteHeader(a.status)
		_, _ = w.Write([]byte(a.body))
	}))
	for name, a := range answers {
		req := httptest.NewRequest(http.MethodPost, "/"+name, strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", name)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != a.status {
			t.Fatalf("%s: status %d, want %d", name, w.Code, a.status)
		}
	}
	// A record of idem.Do whose result has the fields of a response.
	k, err := idem.ParseKey(idem.MustNamespace("jobs"), "job-1")
	if err != nil {
		t.Fatal(err)
	}
	lookalike := map[string]any{"v": 1, "status": 200, "body": "aGk="}
	if _, err := idem.Do(context.Background(), st, k, map[string]int{"order": 7}, func(context.Context) (map[string]any, error) { return lookalike, nil }, nil); err != nil {
		t.Fatal(err)
	}

	type shown struct {
		Result   json.RawMessage `json:"result"`
		Response *struct {
			Status     int             `json:"status"`
			Header     http.Header     `json:"header"`
			Body       json.RawMessage `json:"body"`
			BodyFormat string          `json:"body_format"`
		} `json:"response"`
	}
	inspect := func(t *testing.T, args ...string) (shown, string) {
		t.Helper()
		r := runIdem(t, t.TempDir(), nil, append([]string{"inspect", "--store", "sqlite:" + path}, args...)...)
		var s shown
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &s) != nil {
			t.Fatalf("idem inspect %q: exit %d, stdout %q, stderr %q", args, r.code, r.stdout, r.stderr)
		}
		if !utf8.ValidString(r.stdout) { // JSON is UTF-8 (RFC 8259): a strict parser refuses other bytes
			t.Errorf("idem inspect %q: stdout %q is not UTF-8", args, r.stdout)
		}
		return s, r.stdout
	}
	for _, tc := range []struct {
		key, format, body string
		header            http.Header
	}{
		{"json", "json", `{"id":1,"note":"<b> & co"}`, answers["json"].header},
		{"problem", "json", `{"title":"no"}`, answers["problem"].header},
		{"not-json", "text", `"not json"`, answers["not-json"].header},
		{"text", "text", `"héllo <world>"`, http.Header{"Content-Type": {"text/plain"}, "Content-Disposition": {"attachment; filename=\"caf\uFFFD.txt\""}}},
		{"binary", "base64", `"AP8="`, answers["binary"].header},
		{"json-not-utf8", "base64", `"eyJhIjoi/yJ9"`, answers["json-not-utf8"].header},
		{"empty", "text", `""`, http.Header{}},
	} {
		t.Run(tc.key, func(t *testing.T) {
			s, out := inspect(t, "--key", tc.key)
			if s.Response == nil {
				t.Fatalf("no response shown: %s", out)
			}
			var body any
			if err := json.Unmarshal(s.Response.Body, &body); err != nil {
				t.Fatal(err)
			}
			compact, _ := json.Marshal(body)
			var want any
			_ = json.Unmarshal([]byte(tc.body), &want)
			wantCompact, _ := json.Marshal(want)
			if s.Response.Status != answers[tc.key].status || s.Response.BodyFormat != tc.format || string(compact) != string(wantCompact) {
				t.Errorf("response: status %d, body_format %q, body %s; want %d, %q, %s", s.Response.Status, s.Response.BodyFormat, s.Response.Body, answers[tc.key].status, tc.format, tc.body)
			}
			if d := cmp.Diff(tc.header, s.Response.Header); d != "" {
				t.Errorf("header (-want +got):\n%s", d)
			}
			if status, _, _, err := idemhttp.DecodeRecordedResponse(s.Result); err != nil || status != answers[tc.key].status {
				t.Errorf("result %s is not the record as stored (%d, %v)", s.Result, status, err)
			}
			if strings.Contains(out, `\u003c`) {
				t.Errorf("'<' escaped in %s", out)
			}
		})
	}
	t.Run("idem.Do", func(t *testing.T) {
		s, out := inspect(t, "--namespace", "jobs", "--key", "job-1")
		var result map[string]any
		if s.Response != nil || strings.Contains(out, `"response"`) || json.Unmarshal(s.Result, &result) != nil || result["body"] != "aGk=" {
			t.Errorf("an idem.Do record shown as %s; want its result as stored and no response", out)
		}
	})
}

// TestInspectAuthorizationAsTheProxyScopes: idem inspect --authorization
// finds the record of a request that the proxy received with that
// Authorization header, given the value as the client sent it: HTTP drops
// the spaces and tabs around a header's value before the proxy computes
// the scope, so idem inspect drops them too (curl -H 'Authorization:
// Bearer tok ' sends the trailing space). Without --authorization, the
// record not found, the message says to give it.
func TestInspectAuthorizationAsTheProxyScopes(t *testing.T) {
	up := newCounting(t)
	dsn := sqliteDSN(t)
	p := startProxy(t, "--upstream", up.srv.URL, "--store", dsn)
	conn, err := net.Dial("tcp", strings.TrimPrefix(p.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"amount":1}`
	fmt.Fprintf(conn, "POST /charges HTTP/1.1\r\nHost: x\r\nIdempotency-Key: with-auth\r\nAuthorization: Bearer tok \t\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("POST: status %d, want 201", res.StatusCode)
	}
	// Without --authorization, the record is not found, and the message
	// says where it is.
	r := runIdem(t, t.TempDir(), nil, "inspect", "--store", dsn, "--key", "with-auth")
	if want := `no live record for key "with-auth" in namespace http (scope ""): never recorded, expired (a record lives --ttl after its request) or purged; the record of a request sent with the Authorization header is in a scope of its own: give --credential with its value`; r.code != 1 || !strings.Contains(r.stderr, want) {
		t.Errorf("idem inspect without --authorization: exit %d, stderr %q; want 1 and %q", r.code, r.stderr, want)
	}
	for _, auth := range []string{"Bearer tok \t", "Bearer tok", " Bearer tok"} {
		r := runIdem(t, t.TempDir(), nil, "inspect", "--store", dsn, "--key", "with-auth", "--authorization", auth)
		var rec struct {
			Key, Scope string
		}
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &rec) != nil || rec.Key != "with-auth" || rec.Scope == "" {
			t.Errorf("idem inspect --authorization %q: exit %d, stdout %q, stderr %q; want the record of the request sent with it", auth, r.code, r.stdout, r.stderr)
		}
	}
}

// TestInspectCredentialAsTheProxyScopes: idem inspect --scope-by and
// --credential find the record of a request that a proxy run with that
// --scope-by received: --credential is the value of the header or cookie
// --scope-by names (the Authorization header's by default), and the scope
// is computed from it as the proxy computes it. Without --credential the
// message says to give it; --authorization, which names the Authorization
// header, is refused beside a --scope-by of another header or a cookie,
// and --credential beside --scope-by none.
func TestInspectCredentialAsTheProxyScopes(t *testing.T) {
	up := newCounting(t)
	for _, c := range []struct {
		scopeBy, header, value, credential string
	}{
		{"header:X-Api-Key", "X-Api-Key", "key-1", "key-1"},
		{"cookie:session", "Cookie", "_ga=1; session=s-1", "s-1"},
		{"authorization", "Authorization", "Bearer tok", "Bearer tok"},
	} {
		t.Run(c.scopeBy, func(t *testing.T) {
			dsn := sqliteDSN(t)
			p := startProxy(t, "--upstream", up.srv.URL, "--store", dsn, "--scope-by", c.scopeBy)
			req, _ := http.NewRequest(http.MethodPost, p.base+"/charges", strings.NewReader(`{"amount":1}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", "scoped")
			req.Header.Set(c.header, c.value)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusCreated {
				t.Fatalf("POST: status %d, want 201", res.StatusCode)
			}
			r := runIdem(t, t.TempDir(), nil, "inspect", "--store", dsn, "--key", "scoped", "--scope-by", c.scopeBy)
			if r.code != 1 || !strings.Contains(r.stderr, "give --credential") {
				t.Errorf("without --credential: exit %d, stderr %q; want 1 and a hint to give --credential", r.code, r.stderr)
			}
			r = runIdem(t, t.TempDir(), nil, "inspect", "--store", dsn, "--key", "scoped", "--scope-by", c.scopeBy, "--credential", c.credential)
			var rec struct{ Key, Scope string }
			if r.code != 0 || json.Unmarshal([]byte(r.stdout), &rec) != nil || rec.Key != "scoped" || rec.Scope == "" {
				t.Errorf("--credential %q: exit %d, stdout %q, stderr %q; want the record", c.credential, r.code, r.stdout, r.stderr)
			}
			r = runIdem(t, t.TempDir(), nil, "inspect", "--store", dsn, "--key", "scoped", "--scope-by", c.scopeBy, "--credential", c.credential+"x")
			if r.code != 1 || !strings.Contains(r.stderr, "no live record") {
				t.Errorf("another credential: exit %d, stderr %q; want 1, no live record", r.code, r.stderr)
			}
		})
	}
	dsn := sqliteDSN(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--scope-by", "header:X-Api-Key", "--authorization", "Bearer t"}, "--authorization"},
		{[]string{"--scope-by", "none", "--credential", "c"}, "--scope-by none"},
		{[]string{"--scope-by", "header:", "--credential", "c"}, "--scope-by"},
		{[]string{"--scope", "s", "--credential", "c"}, "not both"},
		{[]string{"--authorization", "a", "--credential", "c"}, "not both"},
	} {
		r := runIdem(t, t.TempDir(), nil, append([]string{"inspect", "--store", dsn, "--key", "k"}, c.args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("idem inspect %q: exit %d, stderr %q; want 2 and %q", c.args, r.code, r.stderr, c.want)
		}
	}
}
