package main_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestProxyServesTLS: with --tls-cert and --tls-key, idem proxy serves
// HTTPS, HTTP/2 offered: a retried POST is replayed over it, and the
// upstream learns from X-Forwarded-Proto that the client came by https.
// A certificate renewed in place is served to the next connections
// without a restart; a pair that changed but does not load (the key not
// yet written) leaves the one read before served. Giving one flag without
// the other is a usage mistake; a file that does not load stops the
// start-up naming both flags.
func TestProxyServesTLS(t *testing.T) {
	var mu sync.Mutex
	var protos []string
	up := newCounting(t)
	inner := up.srv.Config.Handler
	up.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		protos = append(protos, r.Header.Get("X-Forwarded-Proto"))
		mu.Unlock()
		inner.ServeHTTP(w, r)
	})
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	pool := x509.NewCertPool()
	pool.AddCert(writeCertPair(t, certFile, keyFile, 1))
	p := startProxy(t, "--upstream", up.srv.URL, "--store", "memory", "--tls-cert", certFile, "--tls-key", keyFile)
	base := strings.Replace(p.base, "http://", "https://", 1)
	// serial is the serial number of the certificate a new connection is
	// served.
	serial := func() int64 {
		t.Helper()
		c, err := tls.Dial("tcp", strings.TrimPrefix(base, "https://"), &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
	}

	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
	defer client.CloseIdleConnections()
	var bodies []string
	for i := range 2 {
		req, _ := http.NewRequest(http.MethodPost, base+"/charges", strings.NewReader(`{"amount":1}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "over-tls")
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusCreated || res.ProtoMajor != 2 || (i == 1) != (res.Header.Get("Idempotent-Replayed") == "true") {
			t.Fatalf("request %d: %s %d, replayed %q; want HTTP/2 201, the second replayed", i+1, res.Proto, res.StatusCode, res.Header.Get("Idempotent-Replayed"))
		}
		bodies = append(bodies, string(b))
	}
	mu.Lock()
	seen := append([]string(nil), protos...)
	mu.Unlock()
	if bodies[0] != bodies[1] || up.runs("over-tls") != 1 || len(seen) != 1 || seen[0] != "https" {
		t.Errorf("bodies %q, %d runs, upstream saw X-Forwarded-Proto %q; want one run with https, replayed", bodies, up.runs("over-tls"), seen)
	}

	if got := serial(); got != 1 {
		t.Fatalf("served certificate %d, want 1", got)
	}
	// Renewed in place: the certificate first, the key not yet (the pair
	// does not load), then both.
	old, _ := os.ReadFile(keyFile)
	pool.AddCert(writeCertPair(t, certFile, keyFile, 2))
	renewedKey, _ := os.ReadFile(keyFile)
	if err := os.WriteFile(keyFile, old, 0o600); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Minute)
	_ = os.Chtimes(certFile, later, later)
	// The files are looked at during handshakes, at most once a second.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(p.output.String(), "do not load") {
		if got := serial(); got != 1 {
			t.Fatalf("with a certificate whose key is not written yet: served %d, want the one read before, 1", got)
		}
		if time.Now().After(deadline) {
			t.Fatalf("a pair that does not load is not logged\n%s", p.output)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := serial(); got != 1 {
		t.Errorf("after the pair that does not load was logged: served %d, want the one read before, 1", got)
	}
	if err := os.WriteFile(keyFile, renewedKey, 0o600); err != nil {
		t.Fatal(err)
	}
	_ = os.Chtimes(keyFile, later, later.Add(time.Second))
	for serial() != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the renewed certificate is not served\n%s", p.output)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if out := p.output.String(); !strings.Contains(out, "do not load") || !strings.Contains(out, "read again") {
		t.Errorf("proxy output %q; want the pair that did not load logged, then the one read again", out)
	}

	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--tls-cert", certFile}, 2, "--tls-cert needs --tls-key"},
		{[]string{"--tls-key", keyFile}, 2, "--tls-key needs --tls-cert"},
		{[]string{"--tls-cert", filepath.Join(dir, "none.pem"), "--tls-key", keyFile}, 1, "--tls-cert " + filepath.Join(dir, "none.pem") + ", --tls-key"},
		{[]string{"--tls-cert", keyFile, "--tls-key", certFile}, 1, "--tls-key"},
	} {
		r := runIdem(t, t.TempDir(), nil, append([]string{"proxy", "--upstream", up.srv.URL, "--store", "memory", "--listen", "127.0.0.1:0"}, c.args...)...)
		if r.code != c.code || !strings.Contains(r.stderr, c.want) {
			t.Errorf("idem proxy %q: exit %d, stderr %q; want %d and %q", c.args, r.code, r.stderr, c.code, c.want)
		}
	}
}

// writeCertPair writes a self-signed certificate for 127.0.0.1 with the
// given serial number, and its key, to the two files in PEM, and returns
// the certificate.
func writeCertPair(t *testing.T, certFile, keyFile string, serial int64) *x509.Certificate {
	t.Helper()
	der, key := selfSignedCert(t, serial)
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// TestProxyToAnHTTPSUpstreamOfAPrivateCA: an https:// upstream is
// verified against the system's roots, which SSL_CERT_FILE replaces: with
// it naming the upstream's CA, requests are forwarded (and a retry
// replayed); without it, they are answered 502 and not recorded.
func TestProxyToAnHTTPSUpstreamOfAPrivateCA(t *testing.T) {
	var runs atomic.Int32
	up := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(up.Close)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: up.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	untrusted := startProxy(t, "--upstream", up.URL, "--store", "memory")
	if r := sendUntilDone(t, untrusted.base, "private-ca", `{}`); r.status != http.StatusBadGateway || runs.Load() != 0 {
		t.Fatalf("without SSL_CERT_FILE: %+v, %d runs; want 502 and none", r, runs.Load())
	}
	trusted := startProxyVia(t, []string{"env", "SSL_CERT_FILE=" + caFile}, "--upstream", up.URL, "--store", "memory")
	r1, r2 := sendUntilDone(t, trusted.base, "private-ca", `{}`), sendUntilDone(t, trusted.base, "private-ca", `{}`)
	if r1.status != http.StatusCreated || !r2.replayed || runs.Load() != 1 {
		t.Errorf("with SSL_CERT_FILE: %+v then %+v, %d runs; want 201 once, then replayed", r1, r2, runs.Load())
	}
}
