package main_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"
)

// echoUpstream is an upstream that answers every request with 101
// Switching Protocols and then echoes what the client sends until the
// connection closes.
func echoUpstream(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
		if brw.Flush() != nil {
			return
		}
		_, _ = io.Copy(c, brw)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// upgraded is a connection upgraded through the proxy.
type upgraded struct {
	net.Conn
	r *bufio.Reader
}

// upgrade sends through the proxy at base a protected request (POST with
// Idempotency-Key key) asking for a protocol upgrade, and returns the
// connection once the upstream's 101 has come back.
func upgrade(t *testing.T, base, key string) *upgraded {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	fmt.Fprintf(c, "POST /attach HTTP/1.1\r\nHost: x\r\nIdempotency-Key: %s\r\nContent-Length: 0\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n", key)
	u := &upgraded{Conn: c, r: bufio.NewReader(c)}
	res, err := http.ReadResponse(u.r, nil)
	if err != nil || res.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade through the proxy: %v, %v; want 101", res, err)
	}
	return u
}

// echo sends line on u and returns what comes back.
func (u *upgraded) echo(line string) (string, error) {
	if _, err := io.WriteString(u, line+"\n"); err != nil {
		return "", err
	}
	s, err := u.r.ReadString('\n')
	return strings.TrimSuffix(s, "\n"), err
}

// inspectStatus is the status idem inspect shows for key in the SQLite
// store dsn, or "none" when the key has no live record.
func inspectStatus(t *testing.T, dsn, key string) string {
	t.Helper()
	r := runIdem(t, t.TempDir(), nil, "inspect", "--store", dsn, "--key", key)
	switch {
	case r.code == 1 && strings.Contains(r.stderr, "no live record"):
		return "none"
	case r.code != 0:
		t.Fatalf("idem inspect --key %s: exit %d, stderr %q", key, r.code, r.stderr)
	}
	var rec struct{ Status string }
	if err := json.Unmarshal([]byte(r.stdout), &rec); err != nil {
		t.Fatalf("idem inspect --key %s: %v in %q", key, err, r.stdout)
	}
	return rec.Status
}

// TestShutdownSettlesUpgradedConnections: a protected request upgraded
// through the proxy (a WebSocket, say) holds its key while its connection
// is open. On SIGTERM the proxy waits, up to --shutdown-timeout, for
// upgraded connections too, and closes those still open then, so that
// every key they held is settled (released: nothing of an upgrade is
// recorded) before it exits 0; none is left reserved until its lease ends.
func TestShutdownSettlesUpgradedConnections(t *testing.T) {
	dsn := sqliteDSN(t)
	p := startProxy(t, "--upstream", echoUpstream(t), "--store", dsn, "--shutdown-timeout", "2s")
	ended, held := upgrade(t, p.base, "up-ended"), upgrade(t, p.base, "up-held")
	for _, u := range []*upgraded{ended, held} {
		if got, err := u.echo("hello"); got != "hello" || err != nil {
			t.Fatalf("echo through the upgraded connection: %q, %v", got, err)
		}
	}
	if s := inspectStatus(t, dsn, "up-held"); s != "in_progress" {
		t.Fatalf("key of an open upgraded connection: %s, want in_progress", s)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.waitOutput(t, "for 2 in-flight requests to finish")
	// Still served during the grace period, until the client ends it.
	if got, err := ended.echo("still there"); got != "still there" || err != nil {
		t.Errorf("echo after SIGTERM: %q, %v; want the upgraded connection still served", got, err)
	}
	_ = ended.Close()
	// The other one is closed by the proxy at the end of the grace period.
	if n, err := held.r.Read(make([]byte, 1)); err == nil {
		t.Errorf("read %d bytes from the upgraded connection held open; want it closed by the proxy", n)
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Errorf("the upgraded connection held open was not closed by the proxy: %v", err)
	}
	select {
	case <-p.exited:
	case <-time.After(20 * time.Second):
		t.Fatalf("proxy still running 20 s after SIGTERM\n%s", p.output)
	}
	if p.err != nil {
		t.Errorf("proxy exit: %v, want 0\n%s", p.err, p.output)
	}
	if want := "closed 1 upgraded connection still open after --shutdown-timeout 2s"; !strings.Contains(p.output.String(), want) {
		t.Errorf("proxy output lacks %q:\n%s", want, p.output)
	}
	for _, key := range []string{"up-ended", "up-held"} {
		if s := inspectStatus(t, dsn, key); s != "none" {
			t.Errorf("key %s after the proxy exited: %s; want it released", key, s)
		}
	}
}
