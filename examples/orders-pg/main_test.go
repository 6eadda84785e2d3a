package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem/internal/pgtest"
)

// ordersCmd builds the orders-pg command and returns it, to run with
// args and the environment env (and nothing else of the test's but PATH
// and HOME).
func ordersCmd(t *testing.T, env []string, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "orders-pg")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("building orders-pg: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	return cmd, &out
}

// TestNoDatabaseURL: without DATABASE_URL the command says so, rather
// than failing to connect to a default database.
func TestNoDatabaseURL(t *testing.T) {
	cmd, out := ordersCmd(t, nil, "--listen", "127.0.0.1:0")
	err := cmd.Run()
	if ee, ok := errors.AsType[*exec.ExitError](err); !ok || ee.ExitCode() != 1 || !strings.Contains(out.String(), "DATABASE_URL is not set") {
		t.Fatalf("exit %v, output %q; want exit status 1 and \"DATABASE_URL is not set\"", err, out)
	}
}

// TestGracefulShutdown: SIGTERM lets the request in flight finish (its
// order is created and answered) and the command then exits with 0.
func TestGracefulShutdown(t *testing.T) {
	dsn := pgtest.URL(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd, out := ordersCmd(t, []string{"DATABASE_URL=" + dsn}, "--listen", addr)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{}) // closed when the command has exited, with exitErr
	var exitErr error
	go func() { exitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})

	base := "http://" + addr
	for deadline := time.Now().Add(30 * time.Second); ; {
		res, err := http.Get(base + "/")
		if err == nil {
			res.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("orders-pg not serving: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// Hold the order's insert with a lock on the table.
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `LOCK TABLE orders IN EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		status int
		err    error
	}
	answered := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, base+"/orders", strings.NewReader(`{"sku":"book","qty":1}`))
		req.Header.Set("Idempotency-Key", "o-shutdown")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			answered <- answer{err: err}
			return
		}
		res.Body.Close()
		answered <- answer{status: res.StatusCode}
	}()
	for deadline := time.Now().Add(30 * time.Second); ; {
		var waiting int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = 'orders'::regclass`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the order's insert never waited on the lock")
		}
		time.Sleep(10 * time.Millisecond)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		t.Fatalf("orders-pg exited (%v) with a request in flight:\n%s", exitErr, out)
	case <-time.After(300 * time.Millisecond):
	}
	if err := tx.Rollback(ctx); err != nil { // the insert goes on
		t.Fatal(err)
	}
	if a := <-answered; a.err != nil || a.status != http.StatusCreated {
		t.Errorf("the request in flight got %d, %v; want 201", a.status, a.err)
	}
	select {
	case <-exited:
		if exitErr != nil {
			t.Fatalf("orders-pg: %v\n%s", exitErr, out)
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
		t.Fatalf("orders-pg still running 30 s after SIGTERM:\n%s", out)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM orders`).Scan(&n); err != nil || n != 1 {
		t.Errorf("%d orders (%v), want 1", n, err)
	}
}
