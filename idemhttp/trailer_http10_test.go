package idemhttp_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/store/memstore"
)

// A response to an HTTP/1.0 request is not chunked by net/http's server,
// which then sends none of its trailers: it is recorded without them, so
// that its replay to an HTTP/1.1 client has no trailers the first client
// never got either.
func TestReplayOfAnHTTP10ResponseHasNoTrailers(t *testing.T) {
	s, _ := memstore.New(memstore.Config{})
	srv := httptest.NewServer(idemhttp.Middleware(idemhttp.Config{Store: s})(helloWithTrailers(nil)))
	defer srv.Close()

	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, _ = io.WriteString(conn, "POST /x HTTP/1.0\r\nHost: x\r\nIdempotency-Key: http10\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusCreated || string(body) != "hello" || len(res.Trailer) != 0 {
		t.Fatalf("HTTP/1.0 request: %d %q, trailers %v; want 201 hello, none sent", res.StatusCode, body, res.Trailer)
	}

	res, replayed := post(t, srv.URL+"/x", "http10", `{}`)
	if res.StatusCode != http.StatusCreated || replayed != "hello" || res.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d %q replayed=%q", res.StatusCode, replayed, res.Header.Get("Idempotent-Replayed"))
	}
	if got := res.Trailer.Get("X-Checksum") + res.Trailer.Get("X-Late"); got != "" || strings.Contains(res.Header.Get("Trailer"), "X-Checksum") {
		t.Errorf("replay: trailers %v (Trailer header %q), want none, as the first response had", res.Trailer, res.Header.Get("Trailer"))
	}
}
