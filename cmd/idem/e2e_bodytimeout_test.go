package main_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestStalledKeyedBodyIs408: idem proxy --body-timeout answers a keyed
// request whose body stops coming 408 body-timeout once the timeout has
// passed, without forwarding it or reserving its key (the complete request
// sent next with the key is forwarded and answered 201), and counts it as
// outcome body_timeout on /metrics.
func TestStalledKeyedBodyIs408(t *testing.T) {
	up := newCounting(t)
	p := startProxy(t, "--upstream", up.srv.URL, "--store", "memory", "--body-timeout", "300ms")
	c, err := net.Dial("tcp", strings.TrimPrefix(p.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	const key = "stalled-body"
	if _, err := io.WriteString(c, "POST /charges HTTP/1.1\r\nHost: api.example\r\nIdempotency-Key: "+key+"\r\nContent-Type: application/json\r\nContent-Length: 20\r\n\r\n"+`{"amo`); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled keyed body under --body-timeout 300ms: %v", err)
	}
	b, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	var pb struct {
		Type   string `json:"type"`
		Status int    `json:"status"`
		Detail string `json:"detail"`
	}
	if err := json.Unmarshal(b, &pb); err != nil || res.StatusCode != http.StatusRequestTimeout || res.Header.Get("Content-Type") != "application/problem+json" ||
		pb.Type != "urn:idem:problem:body-timeout" || pb.Status != 408 || pb.Detail != "The request body was not received within 300ms." {
		t.Fatalf("stalled body: %d %s %q; want the 408 body-timeout problem naming 300ms", res.StatusCode, res.Header.Get("Content-Type"), b)
	}
	if n := up.runs(key); n != 0 {
		t.Errorf("the upstream ran %d times for a body never received", n)
	}
	if r := send(t, p.base, key, `{"amount":1234567}`); r.status != http.StatusCreated || up.runs(key) != 1 {
		t.Errorf("the complete request with the key: %d %q, upstream runs %d; want 201 and 1 run", r.status, r.body, up.runs(key))
	}
	if n := metric(t, p, `idem_requests_total{outcome="body_timeout"}`); n != 1 {
		t.Errorf(`idem_requests_total{outcome="body_timeout"} = %d, want 1`, n)
	}
}

// TestBodyTimeoutFlag: --body-timeout (or IDEM_BODY_TIMEOUT) must not be
// negative, a usage mistake (exit 2, the message on stderr only); its
// default, listed in the help, is 1m.
func TestBodyTimeoutFlag(t *testing.T) {
	t.Parallel()
	proxy := []string{"proxy", "--upstream", "http://127.0.0.1:1", "--store", "memory", "--listen", "127.0.0.1:0"}
	for _, tc := range []struct {
		args []string
		env  []string
		want string
	}{
		{append(proxy, "--body-timeout", "-1s"), nil, "idem proxy: --body-timeout -1s: want 0 (no bound) or more, such as 1m\n"},
		{proxy, []string{"IDEM_BODY_TIMEOUT=-1ms"}, "idem proxy: --body-timeout -1ms: want 0 (no bound) or more, such as 1m (--body-timeout from IDEM_BODY_TIMEOUT)\n"},
		{proxy, []string{"IDEM_BODY_TIMEOUT=soon"}, `idem proxy: invalid value "soon" in IDEM_BODY_TIMEOUT (for --body-timeout)`},
	} {
		r := runIdem(t, t.TempDir(), tc.env, tc.args...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) || r.stdout != "" {
			t.Errorf("idem %q %q: exit %d, stdout %q, stderr %q; want 2 and %q on stderr only", tc.args, tc.env, r.code, r.stdout, r.stderr, tc.want)
		}
	}
	r := runIdem(t, t.TempDir(), nil, "proxy", "-h")
	_, help, _ := strings.Cut(r.stdout, "-body-timeout duration")
	help, _, _ = strings.Cut(help, "\n  -") // up to the next flag
	if r.code != 0 || !strings.Contains(help, "(default 1m0s)") {
		t.Errorf("idem proxy -h: exit %d, stdout %q; want 0 and --body-timeout with its default 1m0s", r.code, r.stdout)
	}
}
