package testserver

import "net"

// FreePort asks the kernel for a loopback TCP port no one listens on. The
// port is free only for the moment, so starting a server on it may still
// lose a race; callers try again on another port when that happens.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
