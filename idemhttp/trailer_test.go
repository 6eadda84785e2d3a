package idemhttp_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/store/memstore"
)

// A response with trailers, declared in the Trailer header or set under
// http.TrailerPrefix, is replayed with the same trailers the client got
// the first time (those that may be replayed: never Set-Cookie and the
// like), not without them.
func TestReplayHasTheTrailers(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Trailer", "X-Checksum")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "made")
		w.Header().Set("X-Checksum", "abc")
		w.Header().Set(http.TrailerPrefix+"X-Late", "late")
		w.Header().Set(http.TrailerPrefix+"Set-Cookie", "s=1")
	})
	s, _ := memstore.New(memstore.Config{})
	srv := httptest.NewServer(idemhttp.Middleware(idemhttp.Config{Store: s})(h))
	defer srv.Close()
	up := httptest.NewServer(h)
	defer up.Close()
	p := serveProxy(t, up.URL, idemhttp.ProxyConfig{Timeout: 5 * time.Second})
	for name, url := range map[string]string{"middleware": srv.URL, "proxy": p.URL} {
		for i, want := range []string{"", "true"} {
			res, body := post(t, url+"/x", "trailers", `{}`)
			if res.StatusCode != http.StatusCreated || body != "made" || res.Header.Get("Idempotent-Replayed") != want {
				t.Fatalf("%s, request %d: %d %q replayed=%q", name, i+1, res.StatusCode, body, res.Header.Get("Idempotent-Replayed"))
			}
			if got := res.Trailer.Get("X-Checksum") + " " + res.Trailer.Get("X-Late"); got != "abc late" {
				t.Errorf("%s, request %d: trailers %v, want X-Checksum: abc and X-Late: late", name, i+1, res.Trailer)
			}
			if want != "" && res.Trailer.Get("Set-Cookie") != "" {
				t.Errorf("%s, replay: trailers %v, with a Set-Cookie", name, res.Trailer)
			}
			if strings.HasPrefix(res.Header.Get("Trailer"), http.TrailerPrefix) {
				t.Errorf("%s, request %d: Trailer header %q", name, i+1, res.Header.Get("Trailer"))
			}
		}
	}
}

// The replay's trailers are exactly those the client got the first time,
// as net/http sends them over HTTP/1.1 and over HTTP/2: a trailer declared
// twice is sent with its values twice over HTTP/1.1 and once over HTTP/2,
// one declared both ways with both values or the prefixed one, one
// net/http refuses to send as a trailer (Content-Type, If-Match) or
// declared after the header was written is not sent, and so not replayed
// either.
func TestReplayTrailersAreThoseSent(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header()["Trailer"] = []string{"X-Sum, x-sum", "Content-Type, If-Match, X-Both"}
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "made")
		w.Header().Add("Trailer", "X-Late")
		w.Header().Set("X-Sum", "abc")
		w.Header().Set("If-Match", "m")
		w.Header().Set("X-Late", "late")
		w.Header().Set("X-Both", "declared")
		w.Header().Set(http.TrailerPrefix+"X-Both", "prefixed")
		w.Header().Set(http.TrailerPrefix+"Content-Range", "bytes 0-1/2")
	})
	s, _ := memstore.New(memstore.Config{})
	for _, h2 := range []bool{false, true} {
		srv := httptest.NewUnstartedServer(idemhttp.Middleware(idemhttp.Config{Store: s})(h))
		srv.EnableHTTP2 = h2
		srv.StartTLS()
		defer srv.Close()
		wantSum := map[bool]int{false: 2, true: 1}[h2]
		var first http.Header
		for i, want := range []string{"", "true"} {
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/x", strings.NewReader(`{}`))
			req.Header.Set("Idempotency-Key", fmt.Sprintf("trailers-sent-%v", h2))
			res, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			_ = res.Body.Close()
			if res.StatusCode != http.StatusCreated || string(body) != "made" || res.Header.Get("Idempotent-Replayed") != want || res.ProtoMajor != map[bool]int{false: 1, true: 2}[h2] {
				t.Fatalf("HTTP/2 %v, request %d: %s %d %q replayed=%q", h2, i+1, res.Proto, res.StatusCode, body, res.Header.Get("Idempotent-Replayed"))
			}
			got := res.Trailer.Clone()
			for k, v := range got {
				if len(v) == 0 { // announced, not sent
					delete(got, k)
				}
			}
			if i == 0 {
				first = got
				if len(first["X-Sum"]) != wantSum || first.Get("X-Late") != "" || first.Get("Content-Type") != "" || first.Get("If-Match") != "" {
					t.Fatalf("HTTP/2 %v: the first response's trailers %v are not what net/http is known to send", h2, first)
				}
				continue
			}
			if !reflect.DeepEqual(got, first) {
				t.Errorf("HTTP/2 %v: the replay's trailers %v, the first response's %v", h2, got, first)
			}
		}
	}
}
