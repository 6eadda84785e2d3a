package main_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
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

// idem proxy forwards OPTIONS * (a question about the upstream server as
// a whole) to the upstream as OPTIONS *, rather than answering it itself
// as Go's server does by default.
func TestProxyForwardsOptionsAsterisk(t *testing.T) {
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", "GET, POST, OPTIONS")
		_, _ = io.WriteString(w, r.Method+" "+r.RequestURI)
	}))
	up.Config.DisableGeneralOptionsHandler = true
	up.Start()
	t.Cleanup(up.Close)
	p := startProxy(t, "--upstream", up.URL+"/api", "--store", "memory")
	c, err := net.Dial("tcp", strings.TrimPrefix(p.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "OPTIONS * HTTP/1.1\r\nHost: api.example\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if res.StatusCode != 200 || string(body) != "OPTIONS *" || res.Header.Get("Allow") != "GET, POST, OPTIONS" {
		t.Errorf("OPTIONS * through idem proxy: %d %q, Allow %q; want the upstream's answer to OPTIONS *", res.StatusCode, body, res.Header.Get("Allow"))
	}
}
