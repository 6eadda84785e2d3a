package pgtest

import (
	"fmt"
	"os"
	"sync"

	"github.com/idemgo/idem/internal/testserver"
)

// shared is the server every URL of this test process lives on.
var shared struct {
	once sync.Once
	url  string  // its URL, without a search_path
	err  error   // why there is none
	srv  *Server // non-nil when this process started it
}

// sharedURL returns the shared server's URL, starting the server on the
// first call unless TEST_DATABASE_URL names one.
func sharedURL() (string, error) {
	shared.once.Do(func() {
		if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
			shared.url = u
			return
		}
		srv, err := Launch()
		if err != nil {
			shared.err = err
			return
		}
		shared.srv, shared.url = srv, srv.URL()
		testserver.CloseOnSignal(srv)
	})
	return shared.url, shared.err
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
// TestMain helpers, such as goleak.VerifyTestMain(pgtest.Wrap(m)).
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
	if shared.srv == nil {
		return nil
	}
	err := shared.srv.Close()
	testserver.ForgetOnSignal(shared.srv)
	return err
}
