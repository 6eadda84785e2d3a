package main

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// parseUpstream parses --upstream: an absolute http or https URL. A value
// without a scheme that reads as host:port (127.0.0.1:9000, localhost:9000)
// is refused with the URL the user likely meant. A URL with a query
// string is refused too: the proxy would add the query to every request
// it forwards, ahead of the client's own, which is seldom what was meant
// (a request's URL pasted as the API's). So is a URL with a fragment,
// which is never sent, and one with user info (user:password@): a
// forwarded request carries its client's Authorization, not those
// credentials. So is a port outside 1 to 65535, which the URL parser
// takes and every forwarded request would fail to dial. The messages
// leave out the query and the fragment, as they may hold a token, and the
// password.
func parseUpstream(s string) (*url.URL, error) {
	up, err := url.Parse(s)
	if err == nil && up.Host != "" && (up.Scheme == "http" || up.Scheme == "https") {
		if up.RawQuery != "" {
			base := *up
			base.RawQuery, base.ForceQuery, base.Fragment, base.RawFragment = "", false, "", ""
			return nil, usagef("--upstream %s?… has a query string, which the proxy would add to every request it forwards: give the API's URL without it", base.Redacted())
		}
		if up.Fragment != "" {
			base := *up
			base.Fragment, base.RawFragment = "", ""
			return nil, usagef("--upstream %s#… has a fragment, which is never sent: give the API's URL without it", base.Redacted())
		}
		if up.User != nil {
			return nil, usagef("--upstream %s has user info, which the proxy would not send: a forwarded request carries its client's Authorization header", up.Redacted())
		}
		if p := up.Port(); p != "" {
			if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
				return nil, usagef("--upstream %s has port %s, which no connection can be made to: give a port from 1 to 65535, or none for the scheme's (80, 443)", up.Redacted(), p)
			}
		}
		return up, nil
	}
	// Shown without its password, nor its query (from the first '?'
	// past the password), which may hold a token.
	shown, query := redact(s), ""
	if i := strings.IndexByte(shown, '?'); i >= 0 {
		shown, query = shown[:i], "?…"
	}
	msg := fmt.Sprintf("--upstream %q is not an absolute http or https URL", shown+query)
	if _, _, err := net.SplitHostPort(s); err == nil && !strings.ContainsAny(s, "/?") {
		msg += fmt.Sprintf("; did you mean --upstream http://%s?", shown)
	}
	return nil, usagef("%s", msg)
}

// upstreamIsSelf reports whether up names the address the proxy listens
// on, addr: the proxy would forward each request to itself, again and
// again. It knows the loopback and the listening address by IP, and names
// by what they resolve to; a name that does not resolve is not the proxy.
// An empty host (http://:8080) and an unspecified address
// (http://0.0.0.0:8080) are dialled as the local system, over the
// loopback; a proxy listening on every interface is also reached at each
// address of this machine's interfaces.
func upstreamIsSelf(up *url.URL, addr net.Addr) bool {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		return false
	}
	port := up.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[up.Scheme]
	}
	if port != fmt.Sprint(tcp.Port) {
		return false
	}
	var ips []net.IP
	switch host := up.Hostname(); {
	case host == "":
		ips = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	case net.ParseIP(host) != nil:
		ips = []net.IP{net.ParseIP(host)}
	default:
		ips, _ = net.LookupIP(host)
	}
	for _, ip := range ips {
		if ip.IsUnspecified() { // dialled as the loopback of its family
			if ip.To4() != nil {
				ip = net.IPv4(127, 0, 0, 1)
			} else {
				ip = net.IPv6loopback
			}
		}
		if ip.Equal(tcp.IP) || tcp.IP.IsUnspecified() && (ip.IsLoopback() || isInterfaceAddr(ip)) {
			return true
		}
	}
	return false
}

// isInterfaceAddr reports whether ip is an address of one of this
// machine's network interfaces.
func isInterfaceAddr(ip net.IP) bool {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.Equal(ip) {
			return true
		}
	}
	return false
}
