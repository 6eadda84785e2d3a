// Command withservers runs a command with a PostgreSQL and a Redis server
// for its tests.
//
// Usage:
//
//	withservers -- command [argument ...]
//
// It starts a throwaway PostgreSQL server (internal/pgtest) and a throwaway
// Redis server (internal/redistest), each on a free loopback port in a
// temporary directory, and runs the command with TEST_DATABASE_URL and
// TEST_REDIS_URL naming them and TEST_REQUIRE_SERVERS=1, so that tests that
// need a server fail rather than skip. A variable that is already set is
// kept, and its server is not started. When the command ends, or withservers
// gets SIGINT, SIGTERM or SIGHUP (which it passes on to the command), the
// servers are stopped and removed, and withservers exits with the command's
// exit code. When the process that started withservers dies (go run,
// killed: it does not pass SIGTERM on), the command gets SIGTERM as if
// withservers had, so that the servers do not outlive them both.
package main

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"github.com/idemgo/idem/internal/pgtest"
	"github.com/idemgo/idem/internal/redistest"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

// closer is a server to stop when the command is done.
type closer interface{ Close() error }

func run(args []string) int {
	if len(args) < 2 || args[0] != "--" {
		fmt.Fprintln(os.Stderr, "usage: withservers -- command [argument ...]")
		return 2
	}
	// Catch the signals first, so that none kills us between starting a
	// server and stopping it.
	parent := os.Getppid()
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(signals)

	var servers []closer
	defer func() {
		for _, s := range servers {
			if err := s.Close(); err != nil {
				fmt.Fprintln(os.Stderr, "withservers:", err)
			}
		}
	}()
	if os.Getenv("TEST_DATABASE_URL") == "" {
		srv, err := pgtest.Launch()
		if err != nil {
			return cannotStart("PostgreSQL", err)
		}
		servers = append(servers, srv)
		setenv("TEST_DATABASE_URL", srv.URL())
	}
	if os.Getenv("TEST_REDIS_URL") == "" {
		srv, err := redistest.Launch()
		if err != nil {
			return cannotStart("Redis", err)
		}
		servers = append(servers, srv)
		setenv("TEST_REDIS_URL", srv.URL())
	}
	setenv("TEST_REQUIRE_SERVERS", "1")
	// Printed with passwords hidden: the variables may name the user's own
	// servers, and this line goes to CI logs.
	fmt.Fprintf(os.Stderr, "withservers: TEST_DATABASE_URL=%s TEST_REDIS_URL=%s\n", redacted(os.Getenv("TEST_DATABASE_URL")), redacted(os.Getenv("TEST_REDIS_URL")))

	cmd := exec.Command(args[1], args[2:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "withservers:", err)
		return 127
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	orphaned := time.NewTicker(250 * time.Millisecond)
	defer orphaned.Stop()
	for {
		select {
		case sig := <-signals:
			// A terminal's interrupt has reached the command already;
			// one from kill has not. Either way the command decides.
			_ = cmd.Process.Signal(sig)
		case <-orphaned.C:
			if os.Getppid() != parent {
				orphaned.Stop()
				_ = cmd.Process.Signal(syscall.SIGTERM)
			}
		case err := <-done:
			return exitCode(err)
		}
	}
}

func setenv(key, value string) {
	if err := os.Setenv(key, value); err != nil {
		panic(err) // only for a key with "=" or NUL in it
	}
}

// cannotStart reports a server that would not start, and says how to get one.
func cannotStart(what string, err error) int {
	fmt.Fprintf(os.Stderr, "withservers: cannot start %s: %v\n", what, err)
	if errors.Is(err, pgtest.ErrUnavailable) || errors.Is(err, redistest.ErrUnavailable) {
		fmt.Fprintln(os.Stderr, "withservers: install PostgreSQL and Redis with scripts/install-test-deps.sh, or set TEST_DATABASE_URL and TEST_REDIS_URL")
	}
	return 1
}

// exitCode is the exit code for a command that ended with err: its own, or
// 128 plus the signal that killed it, as a shell would report.
func exitCode(err error) int {
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		if err != nil {
			fmt.Fprintln(os.Stderr, "withservers:", err)
			return 1
		}
		return 0
	}
	if status, ok := exit.Sys().(syscall.WaitStatus); ok && status.Signaled() {
		return 128 + int(status.Signal())
	}
	return exit.ExitCode()
}

// redacted is rawURL with its password, if any, replaced by xxxxx; a value
// that does not parse as a URL is hidden whole.
func redacted(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(not a URL: hidden)"
	}
	return u.Redacted()
}
