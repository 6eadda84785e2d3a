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

	"github.com/jackc/pgx/v5"
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

// heldOrder is an orders-pg command serving one POST /orders whose insert
// waits on a lock of the orders table that the test holds in tx.
type heldOrder struct {
	cmd      *exec.Cmd
	out      *bytes.Buffer
	exited   chan struct{} // closed when the command has exited, with exitErr
	exitErr  error
	pool     *pgxpool.Pool // the test's own pool on the command's database
	tx       pgx.Tx        // holds the lock; rolling it back lets the insert go on
	answered chan answer   // the POST's answer
}

type answer struct {
	status int
	err    error
}

// startHeldOrder starts orders-pg with args (and --listen) and sends it a
// POST /orders whose insert waits on the table's lock, returning once it
// does.
func startHeldOrder(t *testing.T, args ...string) *heldOrder {
	t.Helper()
	dsn := pgtest.URL(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	h := &heldOrder{exited: make(chan struct{}), answered: make(chan answer, 1)}
	h.cmd, h.out = ordersCmd(t, []string{"DATABASE_URL=" + dsn}, append([]string{"--listen", addr}, args...)...)
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { h.exitErr = h.cmd.Wait(); close(h.exited) }()
	t.Cleanup(func() {
		_ = h.cmd.Process.Kill()
		<-h.exited
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
	h.pool, err = pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.pool.Close)
	h.tx, err = h.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.tx.Rollback(ctx) })
	if _, err := h.tx.Exec(ctx, `LOCK TABLE orders IN EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	go func() {
		req, _ := http.NewRequest(http.MethodPost, base+"/orders", strings.NewReader(`{"sku":"book","qty":1}`))
		req.Header.Set("Idempotency-Key", "o-shutdown")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			h.answered <- answer{err: err}
			return
		}
		res.Body.Close()
		h.answered <- answer{status: res.StatusCode}
	}()
	for deadline := time.Now().Add(30 * time.Second); ; {
		var waiting int
		if err := h.pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = 'orders'::regclass`).Scan(&waiting); err != nil {
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
	return h
}

// TestGracefulShutdown: SIGTERM lets the request in flight finish (its
// order is created and answered) and the command then exits with 0.
func TestGracefulShutdown(t *testing.T) {
	h := startHeldOrder(t)
	ctx := context.Background()
	if err := h.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.exited:
		t.Fatalf("orders-pg exited (%v) with a request in flight:\n%s", h.exitErr, h.out)
	case <-time.After(300 * time.Millisecond):
	}
	if err := h.tx.Rollback(ctx); err != nil { // the insert goes on
		t.Fatal(err)
	}
	if a := <-h.answered; a.err != nil || a.status != http.StatusCreated {
		t.Errorf("the request in flight got %d, %v; want 201", a.status, a.err)
	}
	select {
	case <-h.exited:
		if h.exitErr != nil {
			t.Fatalf("orders-pg: %v\n%s", h.exitErr, h.out)
		}
	case <-time.After(30 * time.Second):
		_ = h.cmd.Process.Kill()
		<-h.exited
		t.Fatalf("orders-pg still running 30 s after SIGTERM:\n%s", h.out)
	}
	var n int
	if err := h.pool.QueryRow(ctx, `SELECT count(*) FROM orders`).Scan(&n); err != nil || n != 1 {
		t.Errorf("%d orders (%v), want 1", n, err)
	}
}

// TestShutdownTimeoutBoundsTheWait: a request still running when
// --shutdown-timeout ends does not keep the command from exiting (with 1,
// saying that requests were cut off); its transaction, order and
// idempotency record included, is rolled back with its connection.
func TestShutdownTimeoutBoundsTheWait(t *testing.T) {
	h := startHeldOrder(t, "--shutdown-timeout", "500ms")
	ctx := context.Background()
	if err := h.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.exited:
		if ee, ok := errors.AsType[*exec.ExitError](h.exitErr); !ok || ee.ExitCode() != 1 || !strings.Contains(h.out.String(), "cut off") {
			t.Fatalf("exit %v; want exit status 1, saying requests were cut off:\n%s", h.exitErr, h.out)
		}
	case <-time.After(20 * time.Second):
		_ = h.cmd.Process.Kill()
		<-h.exited
		t.Fatalf("orders-pg still running 20 s after SIGTERM with --shutdown-timeout 500ms, its request held:\n%s", h.out)
	}
	if a := <-h.answered; a.err == nil {
		t.Errorf("the request cut off got %d, want no answer", a.status)
	}
	if err := h.tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	var orders, records int
	if err := h.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM orders), (SELECT count(*) FROM idempotency_record)`).Scan(&orders, &records); err != nil || orders != 0 || records != 0 {
		t.Errorf("%d orders and %d records (%v) after the cut-off request, want none", orders, records, err)
	}
}
