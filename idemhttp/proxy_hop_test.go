package idemhttp_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/idemgo/idem/idemhttp"
)

// Hop-by-hop headers end at the proxy, both ways: the request's
// Connection-listed headers, Keep-Alive, Proxy-*, TE other than
// "trailers", and Upgrade when the request does not ask to upgrade
// (Connection without "upgrade") never reach the upstream; the
// response's Connection-listed headers and Keep-Alive never reach the
// client, neither first nor in a replay. End-to-end headers go through.
func TestProxyStripsHopByHopHeaders(t *testing.T) {
	hop := []string{"Connection", "X-Cli-Hop", "Keep-Alive", "Proxy-Connection", "Proxy-Authorization", "Upgrade"}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var got []string
		for _, name := range hop {
			if v, ok := r.Header[name]; ok {
				got = append(got, name+"="+strings.Join(v, ","))
			}
		}
		if r.Header.Get("X-End") != "1" {
			got = append(got, "X-End missing")
		}
		if te := r.Header.Values("Te"); len(te) > 0 {
			got = append(got, "Te="+strings.Join(te, ","))
		}
		w.Header().Set("Connection", "X-Up-Hop")
		w.Header().Set("X-Up-Hop", "1")
		w.Header().Set("Keep-Alive", "timeout=5")
		w.Header().Set("X-Up-End", "1")
		_, _ = w.Write([]byte(strings.Join(got, ";")))
	}))
	defer up.Close()
	// Replayed if recorded: the upstream's Connection-listed header
	// must not be.
	cfg := idemhttp.ProxyConfig{}
	cfg.Middleware.ReplayHeaders = append(slices.Clone(idemhttp.DefaultReplayHeaders), "X-Up-Hop", "X-Up-End")
	p := serveProxy(t, up.URL, cfg)
	for _, c := range []struct{ name, method, key string }{
		{"protected", "POST", "hop-1"},
		{"replayed", "POST", "hop-1"},
		{"no key", "POST", ""},
		{"unprotected", "GET", ""},
	} {
		for _, te := range []string{"gzip", "trailers"} {
			head := c.method + " /x HTTP/1.1\r\nHost: client.example\r\nContent-Length: 2\r\n" +
				"Connection: X-Cli-Hop\r\nX-Cli-Hop: 1\r\nKeep-Alive: 300\r\nProxy-Connection: keep-alive\r\n" +
				"Proxy-Authorization: Basic eDp5\r\nUpgrade: websocket\r\nTE: " + te + "\r\nX-End: 1"
			if c.key != "" {
				head += "\r\nIdempotency-Key: " + c.key + "-" + te
			}
			res, body := rawRequest(t, p.URL, head, "{}")
			wantTE := map[string]string{"gzip": "", "trailers": "Te=trailers"}[te]
			if res.StatusCode != 200 || body != wantTE {
				t.Errorf("%s, TE %s: %d, the upstream saw %q; want only %q", c.name, te, res.StatusCode, body, wantTE)
			}
			for _, name := range []string{"X-Up-Hop", "Keep-Alive"} {
				if v, ok := res.Header[name]; ok {
					t.Errorf("%s, TE %s: the client got the upstream's hop-by-hop %s: %q", c.name, te, name, v)
				}
			}
			if res.Header.Get("X-Up-End") != "1" || (c.name == "replayed") != (res.Header.Get("Idempotent-Replayed") == "true") {
				t.Errorf("%s, TE %s: X-Up-End %q, replayed %q", c.name, te, res.Header.Get("X-Up-End"), res.Header.Get("Idempotent-Replayed"))
			}
		}
	}
}

// With TrustForwarded, a forwarding header the request's Connection
// header lists is hop-by-hop all the same, and not passed on: the
// upstream gets what the proxy sees in its place.
func TestProxyTrustForwardedDropsConnectionListed(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(strings.Join([]string{r.Header.Get("X-Forwarded-For"), r.Header.Get("X-Forwarded-Host"),
			r.Header.Get("X-Forwarded-Proto"), r.Header.Get("Forwarded")}, "|")))
	}))
	defer up.Close()
	p := serveProxy(t, up.URL, idemhttp.ProxyConfig{TrustForwarded: true})
	for _, key := range []string{"", "\r\nIdempotency-Key: fwd-hop"} {
		res, body := rawRequest(t, p.URL, "POST /x HTTP/1.1\r\nHost: client.example\r\nContent-Length: 2\r\n"+
			"Connection: X-Forwarded-For, x-forwarded-host\r\nConnection: Forwarded, X-Forwarded-Proto\r\n"+
			"X-Forwarded-For: 203.0.113.7\r\nX-Forwarded-Host: public.example\r\nX-Forwarded-Proto: https\r\nForwarded: for=203.0.113.7"+key, "{}")
		if want := "127.0.0.1|client.example|http|"; res.StatusCode != 200 || body != want {
			t.Errorf("key %t: %d, the upstream saw %q, want %q", key != "", res.StatusCode, body, want)
		}
	}
}

// An HTTP/1.0 request without a Host header reaches the upstream without
// an X-Forwarded-Host, rather than with an empty one, with
// TrustForwarded or without.
func TestProxyNoHostNoForwardedHost(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, ok := r.Header["X-Forwarded-Host"]
		_, _ = fmt.Fprintf(w, "%t %q", ok, v)
	}))
	t.Cleanup(up.Close)
	for _, trust := range []bool{false, true} {
		p := serveProxy(t, up.URL, idemhttp.ProxyConfig{TrustForwarded: trust})
		res, body := rawRequest(t, p.URL, "GET /x HTTP/1.0", "")
		if res.StatusCode != 200 || body != "false []" {
			t.Errorf("TrustForwarded %t: %d %q, want no X-Forwarded-Host", trust, res.StatusCode, body)
		}
		res, body = rawRequest(t, p.URL, "GET /x HTTP/1.0\r\nHost: api.example", "")
		if res.StatusCode != 200 || body != `true ["api.example"]` {
			t.Errorf("TrustForwarded %t, with a Host: %d %q, want it forwarded", trust, res.StatusCode, body)
		}
	}
}
