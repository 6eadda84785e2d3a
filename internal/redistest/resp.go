package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// command sends one command to the server at addr on a connection of its
// own and returns the reply, for this package's own probes of servers
// that may not be up yet: a plain dial and a RESP exchange, none of a
// client library's pools, retries and reconnects. It understands simple
// strings, errors, integers and bulk strings.
func command(addr string, args ...string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return "", err
	}
	var req strings.Builder
	fmt.Fprintf(&req, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&req, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(conn, req.String()); err != nil {
		return "", err
	}
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", errors.New("redistest: empty reply")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", errors.New(line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", fmt.Errorf("redistest: bad bulk reply %q", line)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return "", fmt.Errorf("redistest: unexpected reply %q", line)
}
