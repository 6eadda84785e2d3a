package idemhttp_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/idemgo/idem/idemhttp"
)

// The proxy frames what it forwards itself, from the body as it read it:
// a request whose framing is ambiguous (Content-Length twice with
// different values or as a list, a signed one, a transfer coding other
// than chunked, a space before a colon, a bare CR) is refused before it
// reaches the store or the upstream; one with both Content-Length and
// Transfer-Encoding: chunked is read as chunked, its Content-Length
// dropped (RFC 9112, section 6.3), and an HTTP/1.0 one by its
// Content-Length; what follows the body is never part of the request
// sent upstream. A folded header line (obs-fold) goes on as one line, the
// fold a space. With a key and without.
func TestProxyForwardsUnambiguousFraming(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		line := fmt.Sprintf("%s %s body=%q", r.Method, r.URL.Path, b)
		if err != nil {
			line += " err=" + err.Error()
		}
		if v := r.Header.Values("X-Folded"); len(v) > 0 {
			line += fmt.Sprintf(" folded=%q", v)
		}
		mu.Lock()
		seen = append(seen, line)
		mu.Unlock()
	}))
	defer up.Close()
	p := serveProxy(t, up.URL, idemhttp.ProxyConfig{})
	const smuggled = "GET /smuggled HTTP/1.1\r\nHost: h\r\n\r\n"
	for _, key := range []string{"", "\r\nIdempotency-Key: framing"} {
		for i, c := range []struct {
			name, head, body string
			status           int
			upstream         string // what the upstream saw; "" for nothing
		}{
			{"Content-Length and chunked", "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nTransfer-Encoding: chunked", "3\r\nabc\r\n0\r\n\r\n" + smuggled, 200, "POST /a body=\"abc\""},
			{"chunked and Content-Length", "POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nContent-Length: 40", "3\r\nabc\r\n0\r\n\r\n" + smuggled, 200, "POST /a body=\"abc\""},
			{"two Content-Lengths", "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nContent-Length: 41", "abc" + smuggled, 400, ""},
			{"Content-Length list", "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 3, 41", "abc" + smuggled, 400, ""},
			{"Content-Length signed", "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: +3", "abc", 400, ""},
			{"chunked twice", "POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked", "3\r\nabc\r\n0\r\n\r\n", 501, ""},
			{"gzip, chunked", "POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked", "3\r\nabc\r\n0\r\n\r\n", 501, ""},
			{"space before colon", "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length : 3", "abc", 400, ""},
			{"CR in a value", "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nX-Folded: a\rTransfer-Encoding: chunked", "abc", 400, ""},
			{"chunked", "POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked", "3\r\nabc\r\n0\r\n\r\n", 200, "POST /a body=\"abc\""},
			{"same Content-Length twice", "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nContent-Length: 3", "abc", 200, "POST /a body=\"abc\""},
			{"obs-fold", "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nX-Folded: a\r\n Transfer-Encoding: chunked", "abc", 200, "POST /a body=\"abc\" folded=[\"a Transfer-Encoding: chunked\"]"},
			{"HTTP/1.0 chunked", "POST /a HTTP/1.0\r\nHost: h\r\nTransfer-Encoding: chunked\r\nContent-Length: 3", "abc", 200, "POST /a body=\"abc\""},
		} {
			mu.Lock()
			seen = nil
			mu.Unlock()
			head := c.head
			if key != "" {
				head += fmt.Sprintf("%s-%d", key, i)
			}
			res, _ := rawRequest(t, p.URL, head, c.body)
			mu.Lock()
			got := slices.Clone(seen)
			mu.Unlock()
			var want []string
			if c.upstream != "" {
				want = []string{c.upstream}
			}
			if res.StatusCode != c.status || !slices.Equal(got, want) {
				t.Errorf("%s (key %t): %d, the upstream saw %q; want %d and %q", c.name, key != "", res.StatusCode, got, c.status, want)
			}
		}
	}
}

// Forwarding headers a client sends under another spelling, with
// underscores for hyphens (X_Forwarded_For), which CGI-style servers
// (HTTP_X_FORWARDED_FOR) cannot tell from the real ones, never reach the
// upstream; nor, without TrustForwarded, do the forwarding headers the
// proxy does not set itself (X-Forwarded-Port, X-Forwarded-Prefix,
// X-Forwarded-Ssl, X-Real-Ip…), which a client could forge as it could
// the others. With TrustForwarded, those spelled as such are passed on.
func TestProxyDropsForgedForwardingHeaders(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var got []string
		for name, v := range r.Header {
			if n := strings.ToLower(strings.ReplaceAll(name, "_", "-")); strings.HasPrefix(n, "x-forwarded-") || n == "forwarded" || n == "x-real-ip" {
				got = append(got, name+"="+strings.Join(v, ","))
			}
		}
		slices.Sort(got)
		_, _ = io.WriteString(w, strings.Join(got, " "))
	}))
	defer up.Close()
	const forged = "X_Forwarded_For: 203.0.113.7\r\nX-Forwarded_Proto: https\r\nx_forwarded_host: evil.example\r\nX-Real_Ip: 203.0.113.7\r\n" +
		"X-Forwarded-Ssl: on\r\nX-Forwarded-Port: 443\r\nX-Forwarded-Prefix: /admin\r\nX-Real-Ip: 203.0.113.7"
	for _, c := range []struct {
		trust bool
		want  string
	}{
		{false, "X-Forwarded-For=127.0.0.1 X-Forwarded-Host=h X-Forwarded-Proto=http"},
		{true, "X-Forwarded-For=127.0.0.1 X-Forwarded-Host=h X-Forwarded-Port=443 X-Forwarded-Prefix=/admin X-Forwarded-Proto=http X-Forwarded-Ssl=on X-Real-Ip=203.0.113.7"},
	} {
		p := serveProxy(t, up.URL, idemhttp.ProxyConfig{TrustForwarded: c.trust})
		for _, key := range []string{"", fmt.Sprintf("\r\nIdempotency-Key: forged-%t", c.trust)} {
			res, body := rawRequest(t, p.URL, "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n"+forged+key, "{}")
			if res.StatusCode != 200 || body != c.want {
				t.Errorf("TrustForwarded %t, key %t: %d, the upstream saw\n\t%s\nwant\n\t%s", c.trust, key != "", res.StatusCode, body, c.want)
			}
		}
	}
}
