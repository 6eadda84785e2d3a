package redistest

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/idemgo/idem/internal/testserver"
)

// shared is the server every URL of this test process names.
var shared struct {
	mu       sync.Mutex
	resolved bool    // url or err is set
	url      string  // its URL
	err      error   // why there is no server
	srv      *Server // non-nil when this process started it
}

// URL returns the redis:// URL of the shared server, starting the server on
// the first call unless TEST_REDIS_URL names one. Tests on it keep apart by
// key prefix: see Prefix.
//
// When no server can be had, tb is skipped, or fails under CI=true or
// TEST_REQUIRE_SERVERS=1.
func URL(tb testing.TB) string {
	tb.Helper()
	url, err := sharedURL()
	if err != nil {
		giveUp(tb, err)
		return ""
	}
	return url
}

// sharedURL returns the shared server's URL, starting the server if need be.
func sharedURL() (string, error) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.resolved {
		return shared.url, shared.err
	}
	shared.resolved = true
	if u := os.Getenv("TEST_REDIS_URL"); u != "" {
		shared.url = u
		return u, nil
	}
	srv, err := Launch()
	if err != nil {
		shared.err = err
		return "", err
	}
	shared.srv, shared.url = srv, srv.URL()
	testserver.CloseOnSignal(srv)
	return shared.url, nil
}

// sharedURLIfAny returns the shared server's URL if URL has found one,
// without starting one.
func sharedURLIfAny() (string, bool) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	return shared.url, shared.resolved && shared.err == nil
}

// Runner runs a package's tests and returns the exit code: *testing.M, or
// what Wrap returns.
type Runner interface {
	Run() int
}

// Main runs m and then stops and removes the shared server if this process
// started one. Its result is the exit code for os.Exit.
func Main(m Runner) int {
	return Wrap(m).Run()
}

// Wrap returns a Runner that runs m and then stops and removes the shared
// server if this process started one, so that it composes with other
// TestMain helpers, such as goleak.VerifyTestMain(redistest.Wrap(m)).
func Wrap(m Runner) Runner {
	return wrapped{m}
}

type wrapped struct{ m Runner }

func (w wrapped) Run() int {
	code := w.m.Run()
	if err := shutdown(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// shutdown closes the shared server if this process started one.
func shutdown() error {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.srv == nil {
		return nil
	}
	err := shared.srv.Close()
	testserver.ForgetOnSignal(shared.srv)
	return err
}
