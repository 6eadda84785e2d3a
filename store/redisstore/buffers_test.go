package redisstore_test

import (
	"bufio"
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
	"github.com/idemgo/idem/store/redisstore"
)

// TestAutoPipelineKeepsNoCallerBuffer: an auto-pipelined call that returns
// when its context ends leaves its command in a batch, sent later; the
// caller may reuse its buffers as soon as the call returns (idem.Store),
// so the command must not read them then. Here a Begin holds the batch in
// flight (writes are paused on the server) while a Commit and a Begin wait
// behind it and their contexts end; their callers then overwrite the
// result and the payload they passed, as idem proxy reuses pooled buffers.
// When the pause ends the commands still take effect, with the bytes they
// were given, not the ones written over them (the Begin's reservation is
// then released, as its caller has left).
func TestAutoPipelineKeepsNoCallerBuffer(t *testing.T) {
	t.Parallel()
	srv, admin, s := privateAutoPipelined(t, redisstore.Config{AutoPipeline: true})
	ctx := context.Background()
	ns := idemtest.RandomNamespace(t)
	owned := mustKey(t, ns, "owned")
	o, err := s.Begin(ctx, owned, mustRequest(t, `{}`), nil) // connects, and loads the script
	if err != nil || o.Kind != idem.Fresh {
		t.Fatalf("Begin = %v, %v", o.Kind, err)
	}

	// What the server runs, read off MONITOR: the queued Begin, whose
	// caller leaves, is released as it lands
	// (TestAutoPipelineReleasesABeginNobodyHeard), so what it sent is
	// seen there only.
	sent := monitor(t, srv.Addr())

	// Writes wait on the server for 1.5 s; reads, such as the admin's
	// INFO, are answered.
	if err := admin.Do(ctx, "CLIENT", "PAUSE", "1500", "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	held := make(chan error, 1)
	go func() {
		_, err := s.Begin(ctx, mustKey(t, ns, "holder"), mustRequest(t, `{}`), nil)
		held <- err
	}()
	// The holder's batch is on the server when a client is blocked there.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		info, err := admin.Info(ctx, "clients").Result()
		if err != nil {
			t.Fatal(err)
		}
		if n := infoField(info, "blocked_clients"); n >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no client blocked by the pause in 10 s:\n%s", info)
		}
	}

	result := []byte(`{"status":201,"body":"the result"}`)
	payload := []byte(`{"method":"POST","target":"/the-request"}`)
	wantResult, wantPayload := string(result), string(payload)
	queued := mustKey(t, ns, "queued")
	req, err := idem.NewRequest(payload)
	if err != nil {
		t.Fatal(err)
	}
	short := func() context.Context {
		c, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		t.Cleanup(cancel)
		return c
	}
	if err := s.Commit(short(), owned, o.Lease, result); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Commit behind a paused batch: %v, want context.DeadlineExceeded", err)
	}
	if _, err := s.Begin(short(), queued, req, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Begin behind a paused batch: %v, want context.DeadlineExceeded", err)
	}
	// The calls have returned: their buffers are the callers' again.
	copy(result, strings.Repeat("x", len(result)))
	copy(payload, strings.Repeat("y", len(payload)))

	if err := <-held; err != nil {
		t.Fatalf("the holder's Begin: %v", err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		committed, errC := s.Get(ctx, owned)
		_, errB := s.Get(ctx, queued)
		lines := sent()
		if errC == nil && committed.Status == idem.StatusCommitted && errors.Is(errB, idem.ErrNotFound) && strings.Contains(lines, strings.ReplaceAll(wantPayload, `"`, `\"`)) {
			if string(committed.Result) != wantResult {
				t.Errorf("committed result %q, want %q", committed.Result, wantResult)
			}
			if strings.Contains(lines, "yyyyyyyy") {
				t.Errorf("the queued Begin sent the bytes written over its payload:\n%s", lines)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the queued calls took no effect in 10 s: %+v, %v; queued: %v; the server ran:\n%s", committed, errC, errB, lines)
		}
	}
}

// monitor sends MONITOR to the Redis server at addr on a connection of its
// own and returns a function that returns the lines the server has sent
// so far, one command each.
func monitor(t *testing.T, addr string) func() string {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	if line, err := r.ReadString('\n'); err != nil || line != "+OK\r\n" {
		t.Fatalf("MONITOR: %q, %v", line, err)
	}
	var mu sync.Mutex
	var lines strings.Builder
	go func() {
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			mu.Lock()
			lines.WriteString(line)
			mu.Unlock()
		}
	}()
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		return lines.String()
	}
}

// infoField reads an integer field of an INFO reply, or -1.
func infoField(info, name string) int {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			n, err := strconv.Atoi(v)
			if err == nil {
				return n
			}
		}
	}
	return -1
}
