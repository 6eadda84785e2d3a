package main_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// oldRedis serves the few commands a client sends while connecting as a
// Redis 5 answers them (no HELLO, INFO reporting redis_version 5.0.14):
// no Redis that old can be installed here, and the version check is all
// this stands in for. It returns the server's address.
func oldRedis(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					args, err := readCommand(r)
					if err != nil {
						return
					}
					var answer string
					switch strings.ToUpper(args[0]) {
					case "PING":
						answer = "+PONG\r\n"
					case "INFO":
						info := "# Server\r\nredis_version:5.0.14\r\nredis_mode:standalone\r\n\r\n# Replication\r\nrole:master\r\n"
						answer = "$" + strconv.Itoa(len(info)) + "\r\n" + info + "\r\n"
					default: // HELLO, CLIENT SETINFO and everything else Redis 5 did not have
						answer = fmt.Sprintf("-ERR unknown command `%s`, with args beginning with: \r\n", args[0])
					}
					if _, err := io.WriteString(c, answer); err != nil {
						return
					}
				}
			})
		}
	})
	return ln.Addr().String()
}

// readCommand reads one command, an array of bulk strings.
func readCommand(r *bufio.Reader) ([]string, error) {
	line, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "*") {
		return nil, fmt.Errorf("not a command: %q (%v)", line, err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(line[1:]))
	if err != nil || n < 1 {
		return nil, fmt.Errorf("bad array length %q", line)
	}
	args := make([]string, n)
	for i := range args {
		line, err := r.ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "$") {
			return nil, fmt.Errorf("not a bulk string: %q (%v)", line, err)
		}
		size, err := strconv.Atoi(strings.TrimSpace(line[1:]))
		if err != nil || size < 0 {
			return nil, fmt.Errorf("bad bulk length %q", line)
		}
		b := make([]byte, size+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, err
		}
		args[i] = string(b[:size])
	}
	return args, nil
}

// TestRedisTooOldIsRefused: a Redis older than the store needs (6.0) is
// refused at start-up, naming the version found and the one required,
// rather than failing later on commands it lacks; --fail-open does not
// wait for it to change.
func TestRedisTooOldIsRefused(t *testing.T) {
	dsn := "redis://" + oldRedis(t)
	for _, args := range [][]string{
		{"migrate", "--store", dsn},
		{"proxy", "--listen", freeAddr(t), "--upstream", "http://127.0.0.1:9", "--store", dsn, "--fail-open"},
	} {
		r := runIdem(t, t.TempDir(), nil, args...)
		if r.code != 1 || !strings.Contains(r.stderr, "version 5.0.14") || !strings.Contains(r.stderr, "Redis 6.0 or later") {
			t.Errorf("idem %s: exit %d, stderr %q; want 1 naming 5.0.14 and 6.0", args[0], r.code, r.stderr)
		}
	}
}
