package main

import (
	"net"
	"net/url"
	"strings"
	"testing"
)

// TestUpstreamIsSelfLocalSystem: an --upstream whose host is empty
// (http://:8080) or an unspecified address (http://0.0.0.0:8080,
// http://[::]:8080) is dialled as the local system, as is, for a proxy
// listening on every interface, an address of one of this machine's
// interfaces: each names the proxy's own listener, and each request would
// be forwarded to the proxy again and again.
func TestUpstreamIsSelfLocalSystem(t *testing.T) {
	loop4 := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}
	loop6 := &net.TCPAddr{IP: net.IPv6loopback, Port: 8080}
	every := &net.TCPAddr{IP: net.IPv6unspecified, Port: 8080}
	other := &net.TCPAddr{IP: net.IPv4(192, 0, 2, 77), Port: 8080} // no interface of the test machine has it
	for _, tc := range []struct {
		upstream string
		addr     *net.TCPAddr
		want     bool
	}{
		{"http://:8080", loop4, true},
		{"http://:8080", loop6, true},
		{"http://:8080", every, true},
		{"http://0.0.0.0:8080", loop4, true},
		{"http://0.0.0.0:8080", every, true},
		{"http://[::]:8080", loop6, true},
		{"http://[::]:8080", every, true},
		{"http://:8081", loop4, false},
		{"http://0.0.0.0:8081", every, false},
		{"http://0.0.0.0:8080", other, false},
		{"http://127.0.0.1:8080", loop4, true},
		{"http://192.0.2.77:8080", loop4, false},
	} {
		up, err := url.Parse(tc.upstream)
		if err != nil {
			t.Fatal(err)
		}
		if got := upstreamIsSelf(up, tc.addr); got != tc.want {
			t.Errorf("upstreamIsSelf(%s, listening on %s) = %v, want %v", tc.upstream, tc.addr, got, tc.want)
		}
	}

	// An address of one of this machine's interfaces other than the
	// loopback reaches a proxy listening on every interface.
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok || ipn.IP.IsLoopback() || ipn.IP.IsLinkLocalUnicast() {
			continue
		}
		up := &url.URL{Scheme: "http", Host: net.JoinHostPort(ipn.IP.String(), "8080")}
		if !upstreamIsSelf(up, every) {
			t.Errorf("upstreamIsSelf(%s, listening on %s) = false: the address is this machine's", up, every)
		}
		if upstreamIsSelf(up, loop4) {
			t.Errorf("upstreamIsSelf(%s, listening on %s) = true: the proxy listens on the loopback only", up, loop4)
		}
	}
}

// TestUpstreamWithQueryIsRefused: an --upstream with a query string is
// refused, since the proxy would add the query to every request it
// forwards; the message leaves out the query, which may hold a token. A
// path prefix, and a bare '?', are taken.
func TestUpstreamWithQueryIsRefused(t *testing.T) {
	for _, s := range []string{"http://127.0.0.1:9000/api?tenant=a", "https://api.example/?api_key=s3cret#top"} {
		_, err := parseUpstream(s)
		if err == nil || !isUsage(err) || !strings.Contains(err.Error(), "query string") {
			t.Errorf("parseUpstream(%q) = %v; want a usage error about the query string", s, err)
			continue
		}
		if strings.Contains(err.Error(), "tenant") || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("parseUpstream(%q): %q shows the query", s, err)
		}
	}
	for _, s := range []string{"http://svc:s3cret@127.0.0.1:9000/", "https://svc@api.example"} {
		_, err := parseUpstream(s)
		if err == nil || !isUsage(err) || !strings.Contains(err.Error(), "Authorization") || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("parseUpstream(%q) = %v; want a usage error about the credentials that hides the password", s, err)
		}
	}
	for _, s := range []string{"http://127.0.0.1:9000/api/v1", "http://127.0.0.1:9000/?"} {
		if _, err := parseUpstream(s); err != nil {
			t.Errorf("parseUpstream(%q) = %v; want it taken", s, err)
		}
	}
}

// TestUpstreamNotAURLHidesTheQuery: an --upstream refused as no absolute
// http or https URL (no scheme, another scheme) is shown without its
// query string, which may hold a token, as an upstream refused for its
// query is; and without the password of its user part.
func TestUpstreamNotAURLHidesTheQuery(t *testing.T) {
	for _, s := range []string{"127.0.0.1:9000/api?api_key=s3cret", "://127.0.0.1:9000?token=s3cret", "ftp://api.example/?token=s3cret#top", "127.0.0.1:9000?token=s3cret", "u:s3cret?x@h:1/p?q=1"} {
		_, err := parseUpstream(s)
		if err == nil || !isUsage(err) || !strings.Contains(err.Error(), "not an absolute http or https URL") {
			t.Errorf("parseUpstream(%q) = %v; want a usage error saying it is no http URL", s, err)
			continue
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("parseUpstream(%q): %q shows the secret", s, err)
		}
	}
}

// TestUpstreamWithFragmentIsRefused: an --upstream with a fragment
// (#section), which is never sent and so can only be a mistake (a page's
// URL pasted as the API's), is refused with a usage error that does not
// show it; a bare '#' is taken.
func TestUpstreamWithFragmentIsRefused(t *testing.T) {
	for _, s := range []string{"http://127.0.0.1:9000/api#v1", "https://api.example/#s3cret"} {
		_, err := parseUpstream(s)
		if err == nil || !isUsage(err) || !strings.Contains(err.Error(), "fragment") || strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "#v1") {
			t.Errorf("parseUpstream(%q) = %v; want a usage error about the fragment, not showing it", s, err)
		}
	}
	if _, err := parseUpstream("http://127.0.0.1:9000/api#"); err != nil {
		t.Errorf("parseUpstream with a bare '#' = %v; want it taken", err)
	}
}

// TestUpstreamWithPortOutOfRangeIsRefused: an --upstream whose port no
// connection can be made to (0, or past 65535), which the URL parser
// takes and every request would then meet as a 502, is refused at
// start-up with a usage error naming the port; ports 1 to 65535, and none
// (the scheme's), are taken.
func TestUpstreamWithPortOutOfRangeIsRefused(t *testing.T) {
	for _, s := range []string{"http://127.0.0.1:99999", "http://127.0.0.1:0/api", "https://api.example:65536", "http://[::1]:00000"} {
		_, err := parseUpstream(s)
		if err == nil || !isUsage(err) || !strings.Contains(err.Error(), "port") {
			t.Errorf("parseUpstream(%q) = %v; want a usage error about the port", s, err)
		}
	}
	for _, s := range []string{"http://127.0.0.1:1", "http://127.0.0.1:65535/api", "https://api.example", "http://[::1]:8080"} {
		if _, err := parseUpstream(s); err != nil {
			t.Errorf("parseUpstream(%q) = %v; want it taken", s, err)
		}
	}
}
