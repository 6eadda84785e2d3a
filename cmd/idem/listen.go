package main

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
)

// listen listens on addr, the value of the flag name (--listen, --admin).
// A failure names the flag and says what is wrong in the user's terms: an
// address already in use, a URL where host:port is wanted, a port the user
// may not bind. An empty addr is refused: net.Listen would take it for
// a port of its own choosing on every interface, where a value left empty
// (IDEM_LISTEN= in a deployment's environment) most likely meant the
// default.
func listen(name, addr string) (net.Listener, error) {
	if addr == "" {
		return nil, usagef("%s is empty (on the command line or in %s): want host:port, such as 127.0.0.1:8080 (or :8080 for every interface)", name, envName("proxy", strings.TrimPrefix(name, "--")))
	}
	ln, err := net.Listen("tcp", addr)
	switch {
	case err == nil:
		return ln, nil
	case errors.Is(err, syscall.EADDRINUSE):
		return nil, fmt.Errorf("%s %s: the address is already in use (by another idem proxy, the API itself…); stop what listens there or give %s another address", name, addr, name)
	case strings.Contains(addr, "://"):
		return nil, usagef("%s %q: want host:port, such as 127.0.0.1:8080, not a URL", name, addr)
	case errors.Is(err, syscall.EACCES):
		return nil, fmt.Errorf("%s %s: permission denied (a port below 1024 needs privileges); give a port of 1024 or more", name, addr)
	}
	if ae, ok := errors.AsType[*net.AddrError](err); ok {
		return nil, usagef("%s %q: %s; want host:port, such as 127.0.0.1:8080 (or :8080 for every interface)", name, addr, ae.Err)
	}
	return nil, fmt.Errorf("%s %s: %w", name, addr, err)
}
