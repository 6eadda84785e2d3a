package idemhttp_test

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/store/memstore"
)

// encodingReply is the body the encoding tests' handlers answer with:
// long enough to compress, and to be chunked when sent without a length.
var encodingReply = strings.Repeat(`{"id":"ch_1","amount":100}`, 200)

// gzipped is s compressed with gzip.
func gzipped(t *testing.T, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	_, _ = io.WriteString(zw, s)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// rawPost posts to url with key and, when acceptEncoding is not nil, that
// Accept-Encoding, through a client that neither adds one nor decodes
// the body, and returns the response and its body as received.
func rawPost(t *testing.T, url, key string, acceptEncoding []string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"amount":100}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	if acceptEncoding != nil {
		req.Header["Accept-Encoding"] = acceptEncoding
	}
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	defer client.CloseIdleConnections()
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("reading the body: %v", err)
	}
	return res, b
}

// A response the upstream gzipped for a first client that accepts gzip is
// replayed through the proxy, to a retry that does not accept gzip (no
// Accept-Encoding, identity only, gzip refused with q=0), decoded and
// without Content-Encoding; to one that accepts it, as recorded.
func TestProxyReplayDecodesGzipForARetryThatDoesNotAcceptIt(t *testing.T) {
	var runs atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Vary", "Accept-Encoding")
		if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			_, _ = io.WriteString(w, encodingReply)
			return
		}
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		_, _ = io.WriteString(zw, encodingReply)
		_ = zw.Close()
	}))
	defer up.Close()
	p := newProxy(t, up.URL, 5*time.Second)

	first, b := rawPost(t, p.URL+"/charges", "gz-1", []string{"gzip"})
	if first.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("first answer: Content-Encoding %q, want gzip", first.Header.Get("Content-Encoding"))
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if plain, err := io.ReadAll(zr); err != nil || string(plain) != encodingReply {
		t.Fatalf("first answer does not decode to the reply (%v)", err)
	}

	for _, tc := range []struct {
		name           string
		acceptEncoding []string
	}{
		{"none", nil},
		{"empty", []string{""}},
		{"identity", []string{"identity"}},
		{"gzip refused", []string{"br, gzip;q=0"}},
		{"all but gzip", []string{"*, gzip;Q=0.000"}},
	} {
		res, b := rawPost(t, p.URL+"/charges", "gz-1", tc.acceptEncoding)
		if res.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("%s: not replayed", tc.name)
		}
		if v, ok := res.Header["Content-Encoding"]; ok || string(b) != encodingReply {
			t.Errorf("%s: Content-Encoding %q and a body of %d bytes; want none and the %d bytes decoded", tc.name, v, len(b), len(encodingReply))
		}
		if res.ContentLength != -1 || res.Header.Get("Content-Type") != "application/json" || res.Header.Get("Vary") != "Accept-Encoding" {
			t.Errorf("%s: Content-Length %d, Content-Type %q, Vary %q; want none declared and the rest as recorded",
				tc.name, res.ContentLength, res.Header.Get("Content-Type"), res.Header.Get("Vary"))
		}
	}
	for _, ae := range []string{"gzip", "deflate, gzip;q=0.5", "*", "X-GZIP"} {
		res, got := rawPost(t, p.URL+"/charges", "gz-1", []string{ae})
		if res.Header.Get("Content-Encoding") != "gzip" || !bytes.Equal(got, b) || res.ContentLength != int64(len(b)) {
			t.Errorf("Accept-Encoding %q: Content-Encoding %q, %d bytes (Content-Length %d); want gzip and the %d bytes recorded",
				ae, res.Header.Get("Content-Encoding"), len(got), res.ContentLength, len(b))
		}
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("the upstream ran %d times, want 1", n)
	}
}

// A handler's own deflate (zlib) coding is decoded as gzip is, for a retry
// that does not accept it; a coding the middleware does not decode (br),
// and a stack of codings, are replayed as recorded.
func TestReplayDecodesDeflateAndLeavesOtherCodings(t *testing.T) {
	var deflated bytes.Buffer
	zw := zlib.NewWriter(&deflated)
	_, _ = io.WriteString(zw, encodingReply)
	_ = zw.Close()
	for _, tc := range []struct {
		coding  string
		body    []byte
		decoded bool
	}{
		{"deflate", deflated.Bytes(), true},
		{"br", []byte("not really brotli"), false},
		{"gzip, gzip", gzipped(t, string(gzipped(t, encodingReply))), false},
	} {
		s, _ := memstore.New(memstore.Config{})
		mw := idemhttp.Middleware(idemhttp.Config{Store: s})
		srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Encoding", tc.coding)
			_, _ = w.Write(tc.body)
		})))
		rawPost(t, srv.URL, "enc-1", []string{tc.coding})
		res, b := rawPost(t, srv.URL, "enc-1", nil)
		srv.Close()
		if res.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("%s: not replayed", tc.coding)
		}
		switch {
		case tc.decoded && (res.Header.Get("Content-Encoding") != "" || string(b) != encodingReply):
			t.Errorf("%s: Content-Encoding %q, %d bytes; want none and the reply decoded", tc.coding, res.Header.Get("Content-Encoding"), len(b))
		case !tc.decoded && (res.Header.Get("Content-Encoding") != tc.coding || !bytes.Equal(b, tc.body)):
			t.Errorf("%s: Content-Encoding %q, %d bytes; want it and the body as recorded", tc.coding, res.Header.Get("Content-Encoding"), len(b))
		}
	}
}

// A recorded gzip body that does not decode is replayed as recorded when
// its gzip header is already broken, and cut off (an error for the
// client, not a body that looks whole) when it breaks further on.
func TestReplayOfBrokenGzip(t *testing.T) {
	whole := gzipped(t, encodingReply)
	corrupt := bytes.Clone(whole)
	corrupt[len(corrupt)-5] ^= 0xff // the checksum
	for _, tc := range []struct {
		name   string
		body   []byte
		asIs   bool
		broken bool
	}{
		{"no gzip header", []byte("plain text labelled gzip"), true, false},
		{"bad checksum", corrupt, false, true},
	} {
		s, _ := memstore.New(memstore.Config{})
		mw := idemhttp.Middleware(idemhttp.Config{Store: s})
		srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Encoding", "gzip")
			_, _ = w.Write(tc.body)
		})))
		rawPost(t, srv.URL, "broken-1", []string{"gzip"})
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`{"amount":100}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "broken-1")
		client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(res.Body)
		_ = res.Body.Close()
		client.CloseIdleConnections()
		srv.Close()
		if tc.asIs && (err != nil || !bytes.Equal(b, tc.body) || res.Header.Get("Content-Encoding") != "gzip") {
			t.Errorf("%s: %d bytes (%v), Content-Encoding %q; want the body as recorded, with gzip", tc.name, len(b), err, res.Header.Get("Content-Encoding"))
		}
		if tc.broken && err == nil {
			t.Errorf("%s: the replay read whole (%d bytes), want it cut off", tc.name, len(b))
		}
	}
}

// The replay of a gzipped response to a retry that does not accept gzip
// sends what a replay of the decoded response would: for HEAD, the
// header without Content-Encoding and without the Content-Length of the
// coded body; for a response that had no Content-Type (net/http does not
// sniff a coded body), none sniffed from the decoded body.
func TestDecodedReplayHeaders(t *testing.T) {
	s, _ := memstore.New(memstore.Config{})
	mw := idemhttp.Middleware(idemhttp.Config{Store: s, Methods: []string{http.MethodPost, http.MethodHead}})
	coded := gzipped(t, "<html><body>hello</body></html>")
	srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Set("Content-Length", strconv.Itoa(len(coded)))
		if r.Method != http.MethodHead {
			_, _ = w.Write(coded)
		}
	})))
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	defer client.CloseIdleConnections()
	for _, method := range []string{http.MethodHead, http.MethodPost} {
		for i, ae := range []string{"gzip", ""} {
			req, _ := http.NewRequest(method, srv.URL, nil)
			req.Header.Set("Idempotency-Key", "headers-"+method)
			req.Header.Set("Accept-Encoding", ae)
			res, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			_ = res.Body.Close()
			if i == 0 {
				if res.Header.Get("Content-Type") != "" {
					t.Fatalf("%s: first answer typed %q, want no type sniffed from a coded body", method, res.Header.Get("Content-Type"))
				}
				continue
			}
			if res.Header.Get("Idempotent-Replayed") != "true" {
				t.Fatalf("%s: not replayed", method)
			}
			ce, ct := res.Header["Content-Encoding"], res.Header.Get("Content-Type")
			switch {
			case method == http.MethodHead && (ce != nil || res.ContentLength != -1):
				t.Errorf("HEAD replay: Content-Encoding %q, Content-Length %d; want neither", ce, res.ContentLength)
			case method == http.MethodPost && (ce != nil || ct != "" || string(b) != "<html><body>hello</body></html>"):
				t.Errorf("POST replay: Content-Encoding %q, Content-Type %q, body %q; want neither and the body decoded", ce, ct, b)
			}
		}
	}
}

// A partial response (206, with its Content-Range) in gzip is a range of
// the coded bytes, which does not decode alone and whose range would not
// fit the decoded ones: it is replayed as recorded, even the first range.
func TestReplayOfGzipRangeIsAsRecorded(t *testing.T) {
	part := gzipped(t, encodingReply)[:40]
	s, _ := memstore.New(memstore.Config{})
	mw := idemhttp.Middleware(idemhttp.Config{Store: s})
	srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Set("Content-Range", "bytes 0-39/81")
		w.WriteHeader(http.StatusPartialContent)
		_, _ = w.Write(part)
	})))
	defer srv.Close()
	rawPost(t, srv.URL, "range-1", []string{"gzip"})
	res, b := rawPost(t, srv.URL, "range-1", nil)
	if res.StatusCode != http.StatusPartialContent || res.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry: %d replayed=%q, want a replayed 206", res.StatusCode, res.Header.Get("Idempotent-Replayed"))
	}
	if res.Header.Get("Content-Encoding") != "gzip" || res.Header.Get("Content-Range") != "bytes 0-39/81" || !bytes.Equal(b, part) {
		t.Errorf("retry: Content-Encoding %q, Content-Range %q, %d bytes; want the range as recorded",
			res.Header.Get("Content-Encoding"), res.Header.Get("Content-Range"), len(b))
	}
}

// A body replayed decoded is the same content, not the same bytes: its
// strong ETag is sent weak, and a digest of the coded bytes is not sent;
// replayed as recorded, both are as they were.
func TestDecodedReplayWeakensItsValidators(t *testing.T) {
	s, _ := memstore.New(memstore.Config{})
	mw := idemhttp.Middleware(idemhttp.Config{Store: s, ReplayHeaders: append(slices.Clone(idemhttp.DefaultReplayHeaders), "Content-Digest")})
	coded := gzipped(t, `{"id":1}`)
	srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Set("ETag", `"v1"`)
		w.Header().Set("Content-Digest", "sha-256=:abc=:")
		_, _ = w.Write(coded)
	})))
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	defer client.CloseIdleConnections()
	for i, tc := range []struct{ accept, etag, digest string }{
		{"gzip", `"v1"`, "sha-256=:abc=:"}, // the first answer
		{"gzip", `"v1"`, "sha-256=:abc=:"}, // replayed as recorded
		{"", `W/"v1"`, ""},                 // replayed decoded
	} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, nil)
		req.Header.Set("Idempotency-Key", "validators")
		req.Header.Set("Accept-Encoding", tc.accept)
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		if got, digest := res.Header.Get("ETag"), res.Header.Get("Content-Digest"); got != tc.etag || digest != tc.digest {
			t.Errorf("answer %d (Accept-Encoding %q): ETag %q, Content-Digest %q; want %q, %q", i, tc.accept, got, digest, tc.etag, tc.digest)
		}
	}
}
