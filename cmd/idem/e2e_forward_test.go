package main_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// idem proxy passes the client's Host on and replaces X-Forwarded-* with
// what it sees; --upstream-host sends the upstream's host, and
// --trust-forwarded keeps the X-Forwarded-* a request came with.
func TestProxyForwardingFlags(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"host":"` + r.Host + `","for":"` + r.Header.Get("X-Forwarded-For") + `","proto":"` + r.Header.Get("X-Forwarded-Proto") + `"}`))
	}))
	t.Cleanup(up.Close)
	upHost := strings.TrimPrefix(up.URL, "http://")
	for _, c := range []struct {
		name  string
		flags []string
		want  string
	}{
		{"default", nil, `{"host":"api.example","for":"127.0.0.1","proto":"http"}`},
		{"--upstream-host", []string{"--upstream-host"}, `{"host":"` + upHost + `","for":"127.0.0.1","proto":"http"}`},
		{"--trust-forwarded", []string{"--trust-forwarded"}, `{"host":"api.example","for":"203.0.113.7, 127.0.0.1","proto":"https"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := startProxy(t, append([]string{"--upstream", up.URL, "--store", "memory"}, c.flags...)...)
			req, _ := http.NewRequest(http.MethodPost, p.base+"/charges", strings.NewReader(`{}`))
			req.Host = "api.example"
			req.Header.Set("Idempotency-Key", "fwd")
			req.Header.Set("X-Forwarded-For", "203.0.113.7")
			req.Header.Set("X-Forwarded-Proto", "https")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			_ = res.Body.Close()
			if res.StatusCode != http.StatusCreated || string(b) != c.want {
				t.Errorf("%d %s, want 201 %s", res.StatusCode, b, c.want)
			}
		})
	}
}
