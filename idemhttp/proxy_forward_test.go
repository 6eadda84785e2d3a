package idemhttp_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemgo/idem/idemhttp"
)

// forwardedSeen is what the upstream of TestProxyForwardingHeaders saw.
type forwardedSeen struct {
	Host, For, XHost, Proto, Forwarded string
}

// The Host and X-Forwarded-* headers the upstream gets: by default the
// client's Host, and X-Forwarded-* from what the proxy sees, whatever the
// client sent (it could forge them); with UpstreamHost, the upstream's
// host; with TrustForwarded, the client's X-Forwarded-* kept, its
// X-Forwarded-For extended with the address the proxy sees. Protected and
// unprotected requests alike.
func TestProxyForwardingHeaders(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(forwardedSeen{
			Host: r.Host, For: r.Header.Get("X-Forwarded-For"), XHost: r.Header.Get("X-Forwarded-Host"),
			Proto: r.Header.Get("X-Forwarded-Proto"), Forwarded: r.Header.Get("Forwarded"),
		})
	}))
	defer up.Close()
	upHost := strings.TrimPrefix(up.URL, "http://")
	for _, c := range []struct {
		name string
		cfg  idemhttp.ProxyConfig
		want forwardedSeen
	}{
		{"default", idemhttp.ProxyConfig{},
			forwardedSeen{Host: "api.example", For: "127.0.0.1", XHost: "api.example", Proto: "http"}},
		{"UpstreamHost", idemhttp.ProxyConfig{UpstreamHost: true},
			forwardedSeen{Host: upHost, For: "127.0.0.1", XHost: "api.example", Proto: "http"}},
		{"TrustForwarded", idemhttp.ProxyConfig{TrustForwarded: true},
			forwardedSeen{Host: "api.example", For: "203.0.113.7, 127.0.0.1", XHost: "public.example", Proto: "https", Forwarded: "for=203.0.113.7;proto=https"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := serveProxy(t, up.URL, c.cfg)
			for _, method := range []string{"POST", "GET"} {
				req, _ := http.NewRequest(method, p.URL+"/seen", strings.NewReader(`{}`))
				req.Host = "api.example"
				req.Header.Set("Idempotency-Key", c.name+"-"+method)
				req.Header.Set("X-Forwarded-For", "203.0.113.7")
				req.Header.Set("X-Forwarded-Host", "public.example")
				req.Header.Set("X-Forwarded-Proto", "https")
				req.Header.Set("Forwarded", "for=203.0.113.7;proto=https")
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				var got forwardedSeen
				err = json.NewDecoder(res.Body).Decode(&got)
				_ = res.Body.Close()
				if err != nil {
					t.Fatalf("%s: %d: %v", method, res.StatusCode, err)
				}
				if got != c.want {
					t.Errorf("%s: the upstream saw %+v, want %+v", method, got, c.want)
				}
			}
		})
	}
}
