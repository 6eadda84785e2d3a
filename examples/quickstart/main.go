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
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/idemgo/idem/examples/internal/payments"
)

func main() {
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	dir, err := os.MkdirTemp("", "idem-quickstart-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "idem")
	build := exec.Command("go", "build", "-o", bin, "./cmd/idem")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building cmd/idem (run this from the repository root): %w", err)
	}

	api := payments.New()
	apiLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go func() { _ = http.Serve(apiLn, api) }()

	proxyAddr, err := freeAddr()
	if err != nil {
		return err
	}
	db := filepath.Join(dir, "idem.db")
	proxy := exec.Command(bin, "proxy", "--listen", proxyAddr, "--upstream", "http://"+apiLn.Addr().String(), "--store", "sqlite:"+db)
	proxy.Stdout, proxy.Stderr = os.Stdout, os.Stderr
	if err := proxy.Start(); err != nil {
		return err
	}
	defer func() {
		_ = proxy.Process.Signal(syscall.SIGTERM)
		_ = proxy.Wait()
	}()
	base := "http://" + proxyAddr
	if err := waitUp(base); err != nil {
		return err
	}

	fmt.Println("\n1. POST /charges with Idempotency-Key: order-1001")
	show(post(base, "order-1001", `{"customer":"cus_1","amount":500}`))
	fmt.Println("\n2. The client retries (say the response was lost): same key, same body")
	show(post(base, "order-1001", `{"customer":"cus_1","amount":500}`))
	fmt.Println("\n3. A bug reuses the key with another body")
	show(post(base, "order-1001", `{"customer":"cus_1","amount":900}`))
	fmt.Printf("\nCharges the API created: %d (without idem the retry would have made 2)\n\n", api.Count())
	return nil
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func waitUp(base string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		if res, err := http.Get(base + "/charges"); err == nil {
			res.Body.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("idem proxy did not start on %s", base)
}

func post(base, key, body string) (*http.Response, string, error) {
	req, _ := http.NewRequest(http.MethodPost, base+"/charges", strings.NewReader(body))
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
