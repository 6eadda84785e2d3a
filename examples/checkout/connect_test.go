package main

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

// TestConnectSaysWhatIsWrong: connect names DATABASE_URL when it is not
// set, and gives up on a database that never answers after its timeout,
// saying so, instead of waiting out the checkout's minute.
func TestConnectSaysWhatIsWrong(t *testing.T) {
	t.Parallel()
	if _, err := connect(context.Background(), "", time.Second); err == nil || !strings.Contains(err.Error(), "DATABASE_URL is not set") {
		t.Errorf("no URL: %v", err)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0") // accepts, never answers
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	start := time.Now()
	_, err = connect(context.Background(), "postgres://u@"+ln.Addr().String()+"/x", 500*time.Millisecond)
	_ = ln.Close()
	<-done
	for _, c := range conns {
		_ = c.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "did not answer within 500ms") || time.Since(start) > 5*time.Second {
		t.Errorf("a database that never answers: %v after %v; want it given up on after 500ms", err, time.Since(start))
	}
}
