package idemhttp_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemgo/idem/idemhttp"
)

// A replay declares its body's length, as the first answer did when the
// handler set Content-Length: a client reading a replay sees the same
// framing instead of a chunked body of unknown length.
func TestReplayDeclaresContentLength(t *testing.T) {
	b := setup(t, idemhttp.Config{})
	b.up.body = strings.Repeat("x", 5000) // beyond net/http's 2 KiB buffer: chunked unless declared
	srv := httptest.NewServer(b.h)
	defer srv.Close()
	post := func() *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/charges", strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "length-1")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil || len(body) != 5000 {
			t.Fatalf("body of %d bytes (%v), want 5000", len(body), err)
		}
		return resp
	}
	post()
	replay := post()
	if replay.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatal("the retry was not replayed")
	}
	if replay.ContentLength != 5000 || len(replay.TransferEncoding) != 0 {
		t.Errorf("replay: Content-Length %d, Transfer-Encoding %v; want 5000 and none", replay.ContentLength, replay.TransferEncoding)
	}
}

// A replayed status that has no body (204, 304) declares no length.
func TestReplayWithoutBodyDeclaresNoLength(t *testing.T) {
	for _, status := range []int{http.StatusNoContent, http.StatusNotModified} {
		b := setup(t, idemhttp.Config{StoreStatus: func(int) bool { return true }})
		b.up.status, b.up.body = status, "-"
		b.do(t, "POST", "/charges", `{}`, key("nobody"))
		w := b.do(t, "POST", "/charges", `{}`, key("nobody"))
		if w.Code != status || w.Header().Get("Idempotent-Replayed") != "true" {
			t.Fatalf("retry: %d replayed=%q, want a replayed %d", w.Code, w.Header().Get("Idempotent-Replayed"), status)
		}
		if v, ok := w.Header()["Content-Length"]; ok {
			t.Errorf("%d replay: Content-Length %q, want none", status, v)
		}
	}
}
