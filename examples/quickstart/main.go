// Command quickstart shows idem proxy at work in one command:
//
//	go run ./examples/quickstart
//
// It builds cmd/idem, starts the toy payments API, starts `idem proxy` in
// front of it on the embedded SQLite store, sends a POST, retries it with
// the same Idempotency-Key (replayed: still one charge), reuses the key with
// another body (422), and stops everything.
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/idemgo/idem/examples/internal/payments"
)

func main() {
	// Ctrl-C ends the run through its deferred clean-up: the proxy is
	// stopped and the temporary directory (the idem binary, the database)
	// removed.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx)
	interrupted := ctx.Err() != nil
	stop()
	switch {
	case interrupted:
		os.Exit(130) // interrupted, and cleaned up
	case err != nil:
		log.Fatal(err)
	}
}

func run(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "idem-quickstart-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "idem")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/idem")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("building cmd/idem (run this from the repository root): %w", err)
	}

	api := payments.New()
	apiLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go func() { _ = http.Serve(apiLn, api) }()

	// The proxy picks a free port (--listen 127.0.0.1:0) and says which.
	db := filepath.Join(dir, "idem.db")
	proxy := exec.Command(bin, "proxy", "--listen", "127.0.0.1:0", "--upstream", "http://"+apiLn.Addr().String(), "--store", "sqlite:"+db)
	proxy.Env = withoutIdemVariables(os.Environ())
	proxy.Stderr = os.Stderr
	out, err := proxy.StdoutPipe()
	if err != nil {
		return err
	}
	if err := proxy.Start(); err != nil {
		return err
	}
	defer func() {
		_ = proxy.Process.Signal(syscall.SIGTERM)
		_ = proxy.Wait()
	}()
	addr, err := listening(ctx, out)
	if err != nil {
		return err
	}
	base := "http://" + addr

	fmt.Println("\n1. POST /charges with Idempotency-Key: order-1001")
	show(post(ctx, base, "order-1001", `{"customer":"cus_1","amount":500}`))
	fmt.Println("\n2. The client retries (say the response was lost): same key, same body")
	show(post(ctx, base, "order-1001", `{"customer":"cus_1","amount":500}`))
	fmt.Println("\n3. A bug reuses the key with another body")
	show(post(ctx, base, "order-1001", `{"customer":"cus_1","amount":900}`))
	fmt.Printf("\nCharges the API created: %d (without idem the retry would have made 2)\n\n", api.Count())
	if err := ctx.Err(); err != nil {
		return err
	}
	if n := api.Count(); n != 1 {
		return fmt.Errorf("the API created %d charges, want 1: the retry was not replayed", n)
	}
	return nil
}

// withoutIdemVariables returns environ ("NAME=value" entries) without the
// IDEM_* variables, from which idem would take the flags the quickstart
// does not give (IDEM_MIGRATE, IDEM_STRIPE, IDEM_ADMIN…): the run shows
// the defaults whatever the shell has set.
func withoutIdemVariables(environ []string) []string {
	return slices.DeleteFunc(slices.Clone(environ), func(kv string) bool {
		return strings.HasPrefix(kv, "IDEM_")
	})
}

// listening passes the proxy's output on to stdout and returns the address
// it says it listens on, within 30 seconds; an error if it exits first.
func listening(ctx context.Context, out io.Reader) (string, error) {
	const mark = "listening on http://"
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			fmt.Println(line)
			if _, rest, ok := strings.Cut(line, mark); ok {
				addr, _, _ := strings.Cut(rest, ",")
				found <- addr
			}
		}
		close(found)
	}()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	select {
	case addr, ok := <-found:
		if !ok {
			return "", errors.New("idem proxy exited before it listened (see its output above)")
		}
		return addr, nil
	case <-ctx.Done():
		return "", fmt.Errorf("idem proxy did not start: %w", ctx.Err())
	}
}

func post(ctx context.Context, base, key, body string) (*http.Response, string, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/charges", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res, string(b), err
}

func show(res *http.Response, body string, err error) {
	if err != nil {
		fmt.Println("   error:", err)
		return
	}
	fmt.Printf("   %s", res.Status)
	if res.Header.Get("Idempotent-Replayed") != "" {
		fmt.Printf("   Idempotent-Replayed: %s", res.Header.Get("Idempotent-Replayed"))
	}
	fmt.Printf("\n   %s\n", strings.TrimSpace(body))
}
