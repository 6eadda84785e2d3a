package redisstore_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgo/idem/idemtest"
	"github.com/idemgo/idem/internal/redistest"
	"github.com/idemgo/idem/store/redisstore"
)

// busyScript keeps the server busy for ARGV[1] milliseconds: every other
// client's command waits until it ends, then runs.
const busyScript = `
local t = redis.call('TIME')
local start = t[1] * 1000 + math.floor(t[2] / 1000)
repeat
	local n = redis.call('TIME')
	if n[1] * 1000 + math.floor(n[2] / 1000) - start >= tonumber(ARGV[1]) then
		return 1
	end
until false
`

// TestBeginReleasedWhenCallerLeaves: without auto-pipelining (idem proxy
// --batch-store-calls=false), a Begin whose context ends while its command
// is on the wire (the server runs it late, its caller has given up) still
// reserves the key when the command runs; the store reads that answer for
// the caller and releases the reservation, which nobody holds, so the key
// is free again at once rather than InFlight until the lease lapses. With
// ContextTimeoutEnabled (as idem proxy sets it) go-redis gives the read up
// at the context's deadline; without it, it would read on to ReadTimeout:
// in both cases Begin returns when its context ends.
func TestBeginReleasedWhenCallerLeaves(t *testing.T) {
	t.Parallel()
	for _, timeoutEnabled := range []bool{true, false} {
		t.Run(fmt.Sprintf("ContextTimeoutEnabled=%v", timeoutEnabled), func(t *testing.T) {
			t.Parallel()
			srv := redistest.Start(t)
			client := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: timeoutEnabled})
			t.Cleanup(func() { _ = client.Close() })
			admin := redis.NewClient(&redis.Options{Addr: srv.Addr(), ReadTimeout: 10 * time.Second})
			t.Cleanup(func() { _ = admin.Close() })
			s, err := redisstore.New(client, redisstore.Config{Lease: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			ns := idemtest.RandomNamespace(t)
			req := mustRequest(t, `{}`)
			if _, err := s.Begin(ctx, mustKey(t, ns, "warm"), req, nil); err != nil { // connects, and loads the script
				t.Fatal(err)
			}

			busy := make(chan error, 1)
			go func() { busy <- admin.Eval(ctx, busyScript, nil, 1500).Err() }()
			waitBusy(t, srv.Addr())
			key := mustKey(t, ns, "left")
			cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			start := time.Now()
			o, err := s.Begin(cctx, key, req, nil)
			took := time.Since(start)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Begin on a busy server past its deadline = %v, %v; want context.DeadlineExceeded", o.Kind, err)
			}
			if took > time.Second { // the server is busy for 1.5 s
				t.Errorf("Begin returned %v after its context ended, want at once", took-300*time.Millisecond)
			}
			if err := <-busy; err != nil {
				t.Fatalf("busy script: %v", err)
			}
			waitFresh(t, s, key, req, "the one whose caller left")
		})
	}
}

// waitBusy returns once the server at addr leaves a PING unanswered for
// 200 ms: busy with a script.
func waitBusy(t *testing.T, addr string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r := bufio.NewReader(conn)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if _, err := conn.Write([]byte("PING\r\n")); err != nil {
			t.Fatal(err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		_, err := r.ReadString('\n')
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Fatal("the server answered PING for 10 s: the busy script did not start")
}
